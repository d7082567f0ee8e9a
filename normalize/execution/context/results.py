"""What a context strategy is made of: one action's result as the model sees it, a prompt.

A result reaches the model inside a boundary it cannot forge: a line
`<<result TAG>>` before the text and `<<end TAG>>` after it, where TAG is a
random marker made once per task (`new_marker`, kept in the driver state so
resume keeps it). A result's own text never holds the marker (`neutralise`
replaces it), so a file or a program cannot end the boundary early and print
lines that pass for normalize's own. `signature` digests an action and its
outcome, so the driver can spot a loop.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace

from normalize.execution.cache import DEFAULT_ASKED_CHARS
from normalize.serial import Record
from normalize.task import Action, ActionResult

Message = dict[str, str]

RESULT_CHARS = DEFAULT_ASKED_CHARS + 500
"""Longest result text: what was asked for (bounded by the cache) passes whole."""
LINE_CHARS = 160

MARKER_BYTES = 8
MARKER_SHOWN = "[marker]"
"""What a result shows where its text held the task's marker."""

MARKS = {"success": "✓", "error": "✗", "blocked": "⊘", "cancelled": "⊘", "interrupted": "?"}


def clip(text: str, limit: int, tail: str = "…") -> str:
    return text if len(text) <= limit else text[: max(limit - len(tail), 0)] + tail


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def new_marker() -> str:
    """A fresh random marker for one task's result boundaries (16 hex digits)."""
    return secrets.token_hex(MARKER_BYTES)


def neutralise(text: str, marker: str) -> str:
    """`text` with every copy of `marker` (any case) replaced, so it cannot close a boundary."""
    if not marker:
        return text
    return re.sub(re.escape(marker), MARKER_SHOWN, text, flags=re.IGNORECASE)


def bounded(text: str, marker: str) -> str:
    """`text` between the boundary lines of `marker`."""
    return f"<<result {marker}>>\n{text}\n<<end {marker}>>"


@dataclass
class ResultEntry(Record):
    """One action's outcome as the model sees it."""

    turn: int
    command: str
    status: str
    text: str
    cache_id: str | None = None
    exit_code: int | None = None
    compacted: bool = False

    @classmethod
    def of(cls, action: Action, result: ActionResult, turn: int,
           limit: int = RESULT_CHARS, marker: str = "") -> ResultEntry:
        """The entry for `result`: its preview (or output), its error, clipped to `limit`.

        Copies of `marker` in the text and the command are neutralised.
        """
        text = neutralise(result.shown, marker)
        if result.error and result.error not in text:
            error = neutralise(result.error, marker)
            text = f"error: {error}\n{text}" if text else f"error: {error}"
        if len(text) > limit:
            if result.cache_id:
                where = f"fetch {result.cache_id}"
            elif action.tool == "fetch" and action.args:
                where = f"clipped; `fetch {action.args[0]} START-END` shows a range of lines"
            else:
                where = "clipped"
            text = clip(text, limit - len(where) - 4, "") + f"\n… ({where})"
        command = neutralise(action.text.strip() or " ".join([action.tool, *action.args]), marker)
        return cls(turn, command, result.status.value, text, result.cache_id, result.exit_code)

    @property
    def mark(self) -> str:
        mark = MARKS.get(self.status, "·")
        if self.exit_code not in (None, 0):
            mark += f" exit {self.exit_code}"
        return mark

    @property
    def head(self) -> str:
        """The command's first line (a heredoc body is not repeated)."""
        return clip(first_line(self.command) or self.command, LINE_CHARS)

    def render(self, marker: str) -> str:
        """The command and its mark, then the text inside the boundary of `marker`."""
        return f"### `{self.head}` {self.mark}\n{bounded(self.text or '(no output)', marker)}"

    def line(self) -> str:
        """One history line: turn, mark, command, the first line of the result."""
        gist = first_line(self.text)
        line = f"{self.turn + 1}. {self.mark} {self.head}"
        return clip(f"{line} → {gist}" if gist else line, LINE_CHARS)

    def compact(self) -> ResultEntry:
        """A short form: the first lines and where the rest is (deterministic)."""
        lines = self.text.splitlines()
        if len(lines) <= 4 and len(self.text) <= 300:
            return replace(self, compacted=True)
        keep = "\n".join(clip(ln, 100) for ln in lines[:3])
        where = (f"fetch {self.cache_id} for the full text" if self.cache_id
                 else "run the command again to see it")
        text = f"{keep}\n… compacted ({len(lines)} lines); {where}"
        return replace(self, text=text, compacted=True)



@dataclass(frozen=True)
class Compaction:
    """What one compaction did (the driver records it as `context_compacted`)."""

    before_chars: int
    after_chars: int
    results_compacted: int


Veto = Callable[[Compaction], str | None]
"""Asked before a compaction with what it would do: a reason to leave the context whole, or None."""


@dataclass(frozen=True)
class Prompt:
    """The messages of one model request (user first and last, alternating)."""

    messages: list[Message]
    compaction: Compaction | None = None
    kept: tuple[Compaction, str] | None = None  # a compaction a hook vetoed, and its reason

    @property
    def chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages)


def signature(action: Action, result: ActionResult) -> str:
    """A short digest of an action and its outcome, for loop detection.

    Durations printed by tools (`in 0.42s`) are masked so that a rerun with the
    same outcome has the same signature.
    """
    text = re.sub(r"\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds)\b", "T", result.shown)
    params = json.dumps(action.params, sort_keys=True, default=str)
    payload = "\x00".join([action.tool, params, result.status.value,
                           str(result.exit_code), text, result.error or ""])
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
