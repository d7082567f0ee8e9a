"""What every harness adapter gives: its command line, its environment, and a stream reader.

A harness is another agent's CLI (Claude Code, Codex, aider) run for one turn
as a program in normalize's sandbox. An adapter knows three things about its
CLI: the argv of a turn (`argv`), the variables it reads (`env`, where the
model server and its key go), and how to read its output, one line at a time,
into normalize events (`TurnReader.feed`). The harness tool
(`normalize.tools.harness.tool`) does the rest the same way for all of them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from normalize.events import Event, HarnessEvent

__all__ = ["Harness", "TurnReader", "TurnRequest", "TurnUsage", "clip"]

SHOWN_OUTPUT = 4000
"""Characters of a harness tool call's output kept in its event."""


@dataclass(frozen=True)
class TurnRequest:
    """One harness turn: what to say, which session to continue, and the bounds it gets."""

    prompt: str
    home: Path
    """The harness's own home (its sessions and settings), kept between turns."""
    session: str | None = None
    model: str | None = None
    base_url: str | None = None
    budget_usd: float | None = None
    new_session: str | None = None
    """A session id to start with, where the harness lets normalize choose it."""
    permissions: dict[str, Any] | None = None
    """The task's approval policy (`[workflow.permissions]`), for a harness that can ask it."""
    context: str = ""
    """What normalize adds to its system prompt: the guarded memory, the skills catalog
    (`normalize.tools.harness.context`); '' for nothing."""


@dataclass
class TurnUsage:
    """Tokens and cost of one harness turn, as its stream reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0

    def priced(self, prices: dict[str, float]) -> float:
        """USD for these tokens at `prices` (per million tokens of each kind)."""
        return (self.input_tokens * prices.get("input", 0.0)
                + self.output_tokens * prices.get("output", 0.0)
                + self.cache_read_tokens * prices.get("cache_read", 0.0)
                + self.cache_write_tokens * prices.get("cache_write", 0.0)) / 1_000_000


@dataclass
class TurnReader(ABC):
    """The state of one turn's stream; adapters subclass it and implement `read`."""

    harness: str
    session: str | None = None
    result: str = ""
    error: str | None = None
    retryable: bool = False
    usage: TurnUsage = field(default_factory=TurnUsage)
    final_usage: bool = False
    """The harness reported the turn's total (else `usage` adds up its messages)."""
    model: str = ""
    unparsed: list[str] = field(default_factory=list)
    stopped: str | None = None
    """Why the harness stopped itself short of the end (its own budget: "budget")."""

    def feed(self, line: str) -> list[Event]:
        """The events one output line gives; a line that is not JSON is noted, not lost."""
        text = line.strip()
        if not text:
            return []
        try:
            obj = json.loads(text)
        except ValueError:
            return self.plain(text)
        if not isinstance(obj, dict):
            return self.plain(text)
        return self.read(obj)

    def plain(self, text: str) -> list[Event]:
        """A line that is not a JSON object (a JSON harness's stray output)."""
        self.unparsed.append(text)
        del self.unparsed[:-20]
        return []

    @abstractmethod
    def read(self, obj: dict[str, Any]) -> list[Event]:
        """The events one JSON object of the stream gives."""

    def kept(self, kind: str, obj: dict[str, Any]) -> HarnessEvent:
        """An event kind normalize does not know: kept whole in the journal."""
        return HarnessEvent(harness=self.harness, kind=kind, data=obj)


class Harness(Protocol):
    """One harness CLI: how to start a turn of it and how to read what it prints."""

    name: ClassVar[str]
    program: ClassVar[str]
    """The executable looked up on PATH (or NORMALIZE_<NAME>_BIN)."""
    key_variables: ClassVar[tuple[str, ...]]
    """Secret variables the harness needs to reach its model (passed through the scrub)."""
    tested_version: ClassVar[str]
    """The version normalize's tests pin (`.ci/run` installs it)."""
    minimum_version: ClassVar[tuple[int, ...]]
    """The oldest version whose output normalize reads (older: refused before a task)."""
    reads_files: ClassVar[bool]
    """Whether its model reads files itself (so a skills catalog naming files is of use)."""

    def argv(self, program: str, request: TurnRequest) -> list[str]: ...

    def env(self, request: TurnRequest) -> dict[str, str]: ...

    def visible(self, request: TurnRequest) -> list[str]:
        """Paths the turn's programs read that the sandbox would empty (/tmp), beside the
        harness's own install: what it is told to start (Claude Code's permission server)."""
        ...

    def reader(self) -> TurnReader: ...

    def prepare(self, request: TurnRequest) -> None:
        """Write what the harness reads from its home before a turn (its config)."""
        ...


CONTEXT_FILE = "normalize-context.txt"
"""In the harness's home: the context, for a harness that reads its system prompt's addition
from a file (kept off the command line, where any process could read it)."""


def write_context(request: TurnRequest) -> Path | None:
    """The request's context written to its file in the harness's home (None: no context;
    a file left from an earlier turn is removed)."""
    path = request.home / CONTEXT_FILE
    if not request.context:
        path.unlink(missing_ok=True)
        return None
    path.write_text(request.context + "\n", encoding="utf-8")
    return path


def clip(text: str, limit: int = SHOWN_OUTPUT) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""
