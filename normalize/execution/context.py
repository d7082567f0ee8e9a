"""Context strategies: how a model-driven task's history becomes the next prompt.

    strategy       what the model sees each turn                                 prompt size
    task_tree      the goal, the path from the task to the current subtask,      bounded
                   live notes, the last turn's results, one line per earlier
                   action (the last `max_history` lines plus a count of older)
    task_list      the same, with the whole subtask checklist instead of a path  bounded
    flat           the goal, live notes, the last `max_results` results          bounded
    conversation   every reply and every result, as alternating messages;        grows
                   past `compact_after_chars` old results shrink to previews
    none           the goal alone (stateless: one-shot decisions)                constant

A strategy is plain state plus rendering: the driver feeds it (`add_reply`,
`add_result`, `add_note`, `add_plan`, `close_subtask`, `add_feedback`) and asks
for the next prompt with `build(goal, turn)`. `snapshot()`/`restore()` carry
the state across processes; under every strategy but `conversation` that
state is bounded, so a task file does not grow with its turn count.

Subtasks (task_tree and task_list only):

- `plan A; B; C` adds A, B and C as subtasks of the current subtask (at first,
  the task itself) and makes A current.
- `done SUMMARY` while a subtask is current closes it (its summary is kept, its
  notes end) and makes the next open subtask current: the next open sibling,
  or else the parent. The task goes on.
- `done` while the task itself is current (no plan, or every subtask closed)
  ends the task.

Under flat, conversation and none a plan is only a result, and `done` ends
the task. Notes: `note TEXT` lives until its subtask closes (the whole task
when no subtask is current); `note --turns N TEXT` is shown in the next N
prompts. Another caller picks a strategy by name with `make_context(name,
**options)`; plugins add theirs with `register_context`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from normalize.errors import ConfigError
from normalize.task import Action, ActionResult

__all__ = [
    "CONTEXTS",
    "Compaction",
    "ContextStrategy",
    "ConversationContext",
    "FlatContext",
    "NoContext",
    "Prompt",
    "ResultEntry",
    "TaskListContext",
    "TaskTreeContext",
    "make_context",
    "register_context",
    "signature",
]

Message = dict[str, str]

MAX_RESULTS = 5
MAX_HISTORY = 12
RESULT_CHARS = 2_500
COMPACT_AFTER_CHARS = 60_000
KEEP_RECENT_TURNS = 2  # conversation: results of the last turns are never compacted
MAX_NOTES = 12
NOTE_CHARS = 400
MAX_SUBTASKS = 60
TITLE_CHARS = 200
LINE_CHARS = 160
PROSE_CHARS = 800
FEEDBACK_CHARS = 1_200

MARKS = {"success": "✓", "error": "✗", "blocked": "⊘", "cancelled": "⊘", "interrupted": "?"}


def _clip(text: str, limit: int, tail: str = "…") -> str:
    return text if len(text) <= limit else text[: max(limit - len(tail), 0)] + tail


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass
class ResultEntry:
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
           limit: int = RESULT_CHARS) -> ResultEntry:
        """The entry for `result`: its preview (or output), its error, clipped to `limit`."""
        text = result.shown
        if result.error and result.error not in text:
            text = f"error: {result.error}\n{text}" if text else f"error: {result.error}"
        if len(text) > limit:
            if result.cache_id:
                where = f"fetch {result.cache_id}"
            elif action.tool == "fetch" and action.args:
                where = f"clipped; `fetch {action.args[0]} START-END` shows a range of lines"
            else:
                where = "clipped"
            text = _clip(text, limit - len(where) - 4, "") + f"\n… ({where})"
        command = action.text.strip() or " ".join([action.tool, *action.args])
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
        return _clip(_first_line(self.command) or self.command, LINE_CHARS)

    def render(self) -> str:
        return f"### `{self.head}` {self.mark}\n{self.text or '(no output)'}"

    def line(self) -> str:
        """One history line: turn, mark, command, the first line of the result."""
        gist = _first_line(self.text)
        line = f"{self.turn + 1}. {self.mark} {self.head}"
        return _clip(f"{line} → {gist}" if gist else line, LINE_CHARS)

    def compact(self) -> ResultEntry:
        """A short form: the first lines and where the rest is (deterministic)."""
        lines = self.text.splitlines()
        if len(lines) <= 4 and len(self.text) <= 300:
            return ResultEntry(**{**asdict(self), "compacted": True})
        keep = "\n".join(_clip(ln, 100) for ln in lines[:3])
        where = (f"fetch {self.cache_id} for the full text" if self.cache_id
                 else "run the command again to see it")
        text = f"{keep}\n… compacted ({len(lines)} lines); {where}"
        return ResultEntry(**{**asdict(self), "text": text, "compacted": True})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResultEntry:
        return cls(int(data.get("turn", 0)), str(data.get("command", "")),
                   str(data.get("status", "")), str(data.get("text", "")),
                   data.get("cache_id"), data.get("exit_code"), bool(data.get("compacted")))


@dataclass(frozen=True)
class Compaction:
    """What one compaction did (the driver records it as `context_compacted`)."""

    before_chars: int
    after_chars: int
    results_compacted: int


@dataclass(frozen=True)
class Prompt:
    """The messages of one model request (user first and last, alternating)."""

    messages: list[Message]
    compaction: Compaction | None = None

    @property
    def chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages)


@dataclass
class _Subtask:
    id: int
    title: str
    status: str = "open"  # "open" | "done"
    summary: str = ""
    children: list[_Subtask] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status,
                "summary": self.summary, "children": [c.to_dict() for c in self.children]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Subtask:
        return cls(int(data["id"]), str(data.get("title", "")), str(data.get("status", "open")),
                   str(data.get("summary", "")),
                   [cls.from_dict(c) for c in data.get("children", [])])

    def walk(self) -> list[_Subtask]:
        return [self, *(n for c in self.children for n in c.walk())]


class ContextStrategy:
    """The shared state and the feeding API; subclasses decide what a prompt shows.

    Options (all strategies accept them; each uses what it needs):
    `max_results` (results shown; flat: the last N, tree/list: of the last
    turn), `max_history` (history lines kept), `result_chars` (longest result
    text), `compact_after_chars` (conversation only; 0 turns compaction off).
    """

    name: ClassVar[str] = ""
    tracks_plan: ClassVar[bool] = False
    """Whether `plan` and `done` move through subtasks (task_tree, task_list)."""
    bounded: ClassVar[bool] = True
    """Whether the prompt (and the snapshot) stay bounded as turns go by."""

    def __init__(self, *, max_results: int = MAX_RESULTS, max_history: int = MAX_HISTORY,
                 result_chars: int = RESULT_CHARS,
                 compact_after_chars: int = COMPACT_AFTER_CHARS) -> None:
        for key, value, least in (("max_results", max_results, 1),
                                  ("max_history", max_history, 0),
                                  ("result_chars", result_chars, 200),
                                  ("compact_after_chars", compact_after_chars, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"context {key} must be an integer of at least {least}, "
                                  f"not {value!r}")
        self.max_results = max_results
        self.max_history = max_history
        self.result_chars = result_chars
        self.compact_after_chars = compact_after_chars
        self.results: list[ResultEntry] = []  # the last max_results
        self.history: list[ResultEntry] = []  # the last max_history (their lines)
        self.older = 0  # history entries dropped
        self.notes: list[dict[str, Any]] = []
        self.feedback: list[str] = []
        self.last_prose = ""
        self.root = _Subtask(0, "")
        self.current = 0
        self.next_id = 1

    # -- feeding -------------------------------------------------------------

    def add_reply(self, text: str, prose: str, turn: int) -> None:
        """The model replied: the feedback it was shown is consumed."""
        del text, turn
        self.feedback = []
        self.last_prose = _clip(prose.strip(), PROSE_CHARS)

    def add_result(self, action: Action, result: ActionResult, turn: int) -> ResultEntry:
        entry = ResultEntry.of(action, result, turn, self.result_chars)
        self.results.append(entry)
        del self.results[: -self.max_results]
        self.history.append(ResultEntry(entry.turn, entry.command, entry.status,
                                        _clip(_first_line(entry.text), LINE_CHARS),
                                        entry.cache_id, entry.exit_code))
        if len(self.history) > self.max_history:
            self.older += len(self.history) - self.max_history
            del self.history[: len(self.history) - self.max_history]
        return entry

    def add_note(self, text: str, turns: int | None, turn: int) -> None:
        """Keep a note: for `turns` prompts after `turn`, or until its subtask closes."""
        until = None if turns is None else turn + max(turns, 1)
        self.notes.append({"text": _clip(text.strip(), NOTE_CHARS), "until": until,
                           "scope": self.current})
        del self.notes[:-MAX_NOTES]

    def add_feedback(self, text: str) -> None:
        """A note from normalize to the model, shown in the next prompt only."""
        self.feedback.append(_clip(text.strip(), FEEDBACK_CHARS))
        del self.feedback[:-4]

    def add_plan(self, steps: list[str]) -> str:
        """Add subtasks under the current one and move to the first; says what happened."""
        if not self.tracks_plan:
            return ""
        node = self._node(self.current)
        room = MAX_SUBTASKS - len(self.root.walk()) + 1
        taken = [s for s in (_clip(s.strip(), TITLE_CHARS) for s in steps) if s][: max(room, 0)]
        if not taken:
            return f"the plan holds at most {MAX_SUBTASKS} subtasks; nothing was added"
        for title in taken:
            node.children.append(_Subtask(self.next_id, title))
            self.next_id += 1
        first = node.children[-len(taken)]
        self.current = first.id
        dropped = len(steps) - len(taken)
        extra = f" ({dropped} dropped: at most {MAX_SUBTASKS} subtasks)" if dropped > 0 else ""
        return f"now on subtask: {first.title}{extra}"

    def close_subtask(self, summary: str) -> str | None:
        """`done` at a subtask: close it and move on. None when the task itself is current."""
        if not self.tracks_plan or self.current == self.root.id:
            return None
        node = self._node(self.current)
        node.status, node.summary = "done", _clip(summary.strip(), TITLE_CHARS)
        for sub in node.walk():  # closing a subtask closes what it was broken into
            sub.status = "done"
        closed = {n.id for n in node.walk()}
        self.notes = [n for n in self.notes if n["scope"] not in closed]
        parent = self._parent(node.id)
        following = [c for c in parent.children if c.status == "open"]
        self.current = following[0].id if following else parent.id
        if self.current == self.root.id:
            return f"closed subtask: {node.title}; every subtask is done; finish the task with done"
        return f"closed subtask: {node.title}; now on: {self._node(self.current).title}"

    @property
    def in_subtask(self) -> bool:
        return self.tracks_plan and self.current != self.root.id

    # -- prompts -------------------------------------------------------------

    def build(self, goal: str, turn: int) -> Prompt:
        """The messages for the prompt of `turn` (0-based)."""
        return Prompt([{"role": "user", "content": self.render(goal, turn)}])

    def render(self, goal: str, turn: int) -> str:
        raise NotImplementedError  # abstract

    def _live_notes(self, turn: int) -> list[str]:
        return [n["text"] for n in self.notes if n["until"] is None or turn <= n["until"]]

    def _sections(self, goal: str, turn: int, *, plan: str = "", history: bool = True,
                  results: list[ResultEntry] | None = None) -> str:
        out = [f"# Task\n{goal.strip()}"]
        if plan:
            out.append(plan)
        notes = self._live_notes(turn)
        if notes:
            out.append("## Notes\n" + "\n".join(f"- {n}" for n in notes))
        shown = self.results if results is None else results
        shown_turns = {r.turn for r in shown}
        if history:
            lines = [h.line() for h in self.history if h.turn not in shown_turns]
            if lines or self.older:
                head = "## Earlier actions"
                if self.older:
                    head += f" ({self.older} older not shown)"
                out.append(head + ("\n" + "\n".join(lines) if lines else ""))
        if self.last_prose:
            out.append("## Your last message\n" + self.last_prose)
        if shown:
            out.append("## Results of your last commands\n"
                       + "\n\n".join(r.render() for r in shown))
        elif turn == 0:
            out.append("Nothing has run yet. Start by looking at the workspace.")
        if self.feedback:
            out.append("## From normalize\n" + "\n".join(f"- {f}" for f in self.feedback))
        out.append(f"(turn {turn + 1}) Reply with prose and command lines, or `done SUMMARY`.")
        return "\n\n".join(out) + "\n"

    def _last_turn_results(self) -> list[ResultEntry]:
        if not self.results:
            return []
        last = self.results[-1].turn
        return [r for r in self.results if r.turn == last]

    # -- subtasks ------------------------------------------------------------

    def _node(self, node_id: int) -> _Subtask:
        for node in self.root.walk():
            if node.id == node_id:
                return node
        return self.root

    def _parent(self, node_id: int) -> _Subtask:
        for node in self.root.walk():
            if any(c.id == node_id for c in node.children):
                return node
        return self.root

    def _path(self) -> list[_Subtask]:
        path = [self._node(self.current)]
        while path[0].id != self.root.id:
            path.insert(0, self._parent(path[0].id))
        return path

    # -- state ---------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "strategy": self.name,
            "results": [asdict(r) for r in self.results],
            "history": [asdict(h) for h in self.history],
            "older": self.older,
            "notes": [dict(n) for n in self.notes],
            "feedback": list(self.feedback),
            "last_prose": self.last_prose,
            "root": self.root.to_dict(),
            "current": self.current,
            "next_id": self.next_id,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        self.results = [ResultEntry.from_dict(r) for r in state.get("results", [])]
        del self.results[: -self.max_results]
        self.history = [ResultEntry.from_dict(h) for h in state.get("history", [])]
        self.older = int(state.get("older", 0))
        self.notes = [dict(n) for n in state.get("notes", [])]
        self.feedback = [str(f) for f in state.get("feedback", [])]
        self.last_prose = str(state.get("last_prose", ""))
        if "root" in state:
            self.root = _Subtask.from_dict(state["root"])
        self.current = int(state.get("current", 0))
        self.next_id = int(state.get("next_id", 1))


class TaskTreeContext(ContextStrategy):
    """The goal, the path to the current subtask, notes, last results, a line per action."""

    name = "task_tree"
    tracks_plan = True

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, plan=self._where(),
                              results=self._last_turn_results())

    def _where(self) -> str:
        if not self.root.children:
            return ""
        path = self._path()
        lines = ["## Where you are"]
        for depth, node in enumerate(path[1:], 1):
            here = "  ← current" if node.id == self.current else ""
            lines.append(f"{'  ' * depth}- {node.title}{here}")
        parent = path[-2] if len(path) > 1 else self.root
        siblings = parent.children
        done = [c for c in siblings if c.status == "done"]
        ahead = [c for c in siblings if c.status == "open" and c.id != self.current]
        if done:
            shown = "; ".join(_clip(f"{c.title}: {c.summary}" if c.summary else c.title, 100)
                              for c in done[-3:])
            more = f" (and {len(done) - 3} more)" if len(done) > 3 else ""
            lines.append(f"Done at this level{more}: {shown}")
        if ahead:
            shown = "; ".join(_clip(c.title, 80) for c in ahead[:3])
            more = f" (and {len(ahead) - 3} more)" if len(ahead) > 3 else ""
            lines.append(f"Still open here{more}: {shown}")
        if self.current == self.root.id:
            lines.append("Every subtask is done: check the whole task, then `done SUMMARY`.")
        else:
            lines.append("`done SUMMARY` closes the current subtask and moves to the next one.")
        return "\n".join(lines)


class TaskListContext(ContextStrategy):
    """Like task_tree, with the whole checklist of subtasks instead of the path."""

    name = "task_list"
    tracks_plan = True

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, plan=self._checklist(),
                              results=self._last_turn_results())

    def _checklist(self) -> str:
        if not self.root.children:
            return ""
        lines = ["## Subtasks"]

        def add(node: _Subtask, depth: int) -> None:
            for child in node.children:
                box = "[x]" if child.status == "done" else \
                    "[>]" if child.id == self.current else "[ ]"
                summary = f" — {child.summary}" if child.summary else ""
                lines.append(_clip(f"{'  ' * depth}{box} {child.title}{summary}", LINE_CHARS))
                add(child, depth + 1)

        add(self.root, 0)
        lines.append("`done SUMMARY` closes the [>] subtask; when all are [x], it ends the task.")
        return "\n".join(lines)


class FlatContext(ContextStrategy):
    """The goal, live notes and the last N results: nothing older."""

    name = "flat"

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, history=False)


class NoContext(ContextStrategy):
    """The goal alone (and normalize's feedback): every prompt is the same."""

    name = "none"

    def render(self, goal: str, turn: int) -> str:
        del turn
        out = [f"# Task\n{goal.strip()}"]
        if self.feedback:
            out.append("## From normalize\n" + "\n".join(f"- {f}" for f in self.feedback))
        out.append("Reply with prose and command lines, or `done SUMMARY`.")
        return "\n\n".join(out) + "\n"


class ConversationContext(ContextStrategy):
    """Every reply and result as messages, the baseline; old results compact past a size.

    Compaction is deterministic: when the messages exceed
    `compact_after_chars`, the oldest results (never those of the last
    KEEP_RECENT_TURNS turns) are replaced by their first lines and their
    fetch id, oldest first, until the messages fit in half the threshold.
    """

    name = "conversation"
    bounded = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.turns: list[dict[str, Any]] = []  # {"reply", "results", "feedback"}
        self.intro_feedback: list[str] = []

    def add_reply(self, text: str, prose: str, turn: int) -> None:
        if self.turns:
            self.turns[-1]["feedback"] = list(self.feedback)
        else:
            self.intro_feedback = list(self.feedback)
        super().add_reply(text, prose, turn)
        self.turns.append({"turn": turn, "reply": text, "results": []})

    def add_result(self, action: Action, result: ActionResult, turn: int) -> ResultEntry:
        entry = super().add_result(action, result, turn)
        if self.turns:
            self.turns[-1]["results"].append(entry)
        return entry

    def build(self, goal: str, turn: int) -> Prompt:
        compaction = self._compact(goal, turn)
        return Prompt(self._messages(goal, turn), compaction)

    def render(self, goal: str, turn: int) -> str:
        return "\n\n".join(m["content"] for m in self._messages(goal, turn))

    def _messages(self, goal: str, turn: int) -> list[Message]:
        intro = [f"# Task\n{goal.strip()}"]
        notes = self._live_notes(turn)
        feedback = self.intro_feedback if self.turns else self.feedback
        if feedback:
            intro.append("## From normalize\n" + "\n".join(f"- {f}" for f in feedback))
        messages: list[Message] = [{"role": "user", "content": "\n\n".join(intro) + "\n"}]
        for index, record in enumerate(self.turns):
            last = index == len(self.turns) - 1
            messages.append({"role": "assistant", "content": record["reply"] or "(empty)"})
            parts = [r.render() for r in record["results"]]
            feedback = self.feedback if last else record.get("feedback", [])
            if last and notes:
                parts.append("## Notes\n" + "\n".join(f"- {n}" for n in notes))
            if feedback:
                parts.append("## From normalize\n" + "\n".join(f"- {f}" for f in feedback))
            messages.append({"role": "user",
                             "content": "\n\n".join(parts) if parts else "(nothing ran)"})
        return messages

    def _compact(self, goal: str, turn: int) -> Compaction | None:
        if not self.compact_after_chars:
            return None
        before = sum(len(m["content"]) for m in self._messages(goal, turn))
        if before <= self.compact_after_chars:
            return None
        target = self.compact_after_chars // 2
        size, count = before, 0
        for record in self.turns[: max(len(self.turns) - KEEP_RECENT_TURNS, 0)]:
            for index, entry in enumerate(record["results"]):
                if size <= target:
                    break
                if entry.compacted:
                    continue
                small = entry.compact()
                record["results"][index] = small
                size -= len(entry.render()) - len(small.render())
                count += 1
        if not count:
            return None
        after = sum(len(m["content"]) for m in self._messages(goal, turn))
        return Compaction(before, after, count)

    def snapshot(self) -> dict[str, Any]:
        state = super().snapshot()
        state["turns"] = [{**t, "results": [asdict(r) for r in t["results"]]}
                          for t in self.turns]
        state["intro_feedback"] = list(self.intro_feedback)
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        super().restore(state)
        self.turns = [{**t, "results": [ResultEntry.from_dict(r) for r in t.get("results", [])]}
                      for t in state.get("turns", [])]
        self.intro_feedback = [str(f) for f in state.get("intro_feedback", [])]


ContextFactory = Callable[..., ContextStrategy]

CONTEXTS: dict[str, ContextFactory] = {
    "task_tree": TaskTreeContext,
    "task_list": TaskListContext,
    "flat": FlatContext,
    "conversation": ConversationContext,
    "none": NoContext,
}
"""Context strategies by name; `register_context` adds one."""

DEFAULT_CONTEXT = "task_tree"
OPTIONS = ("max_results", "max_history", "result_chars", "compact_after_chars")


def register_context(name: str, factory: ContextFactory, *, replace: bool = False) -> None:
    """Register a strategy under `name` (refuses to shadow one unless `replace`)."""
    if not replace and name in CONTEXTS and CONTEXTS[name] is not factory:
        raise ConfigError(f"context strategy {name!r} is already registered")
    CONTEXTS[name] = factory


def make_context(name: str | None = None, **options: Any) -> ContextStrategy:
    """A fresh strategy by name (default task_tree) with `[workflow.context]` options.

    `strategy` among the options is ignored (it is the name); an unknown name
    or option is a ConfigError naming it.
    """
    name = name or options.pop("strategy", None) or DEFAULT_CONTEXT
    options.pop("strategy", None)
    factory = CONTEXTS.get(name)
    if factory is None:
        raise ConfigError(f"unknown context strategy {name!r} "
                          f"(choose from {', '.join(sorted(CONTEXTS))})")
    for key in options:
        if key not in OPTIONS:
            raise ConfigError(f"unknown context option {key!r} "
                              f"(expected {', '.join(OPTIONS)})")
    return factory(**options)


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
