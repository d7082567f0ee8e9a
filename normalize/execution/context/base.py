"""The state every context strategy shares, and the API the driver feeds it through.

A subclass decides what a prompt shows (`render`); the feeding (`add_reply`,
`add_result`, `add_note`, `add_plan`, `close_subtask`, `add_feedback`) and the
snapshot are the same for all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from normalize.errors import ConfigError
from normalize.execution.context.results import (
    LINE_CHARS,
    RESULT_CHARS,
    Prompt,
    ResultEntry,
    Veto,
    bounded,
    clip,
    first_line,
    new_marker,
)
from normalize.serial import Record
from normalize.task import Action, ActionResult

MAX_RESULTS = 5
MAX_HISTORY = 12
COMPACT_AFTER_CHARS = 60_000
MAX_NOTES = 12
NOTE_CHARS = 400
MAX_SUBTASKS = 60
TITLE_CHARS = 200
PROSE_CHARS = 800
FEEDBACK_CHARS = 1_200


@dataclass
class Subtask(Record):
    """One entry of the plan: a title, open or done, and what it was broken into."""

    id: int
    title: str
    status: str = "open"  # "open" | "done"
    summary: str = ""
    children: list[Subtask] = field(default_factory=list)

    def walk(self) -> list[Subtask]:
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
        self.root = Subtask(0, "")
        self.current = 0
        self.next_id = 1
        self.marker = new_marker()  # the task's result boundary; see `results`

    # -- feeding -------------------------------------------------------------

    def add_reply(self, text: str, prose: str, turn: int) -> None:
        """The model replied: the feedback it was shown is consumed."""
        del text, turn
        self.feedback = []
        self.last_prose = clip(prose.strip(), PROSE_CHARS)

    def add_result(self, action: Action, result: ActionResult, turn: int) -> ResultEntry:
        entry = ResultEntry.of(action, result, turn, self.result_chars, self.marker)
        self.results.append(entry)
        del self.results[: -self.max_results]
        self.history.append(ResultEntry(entry.turn, entry.command, entry.status,
                                        clip(first_line(entry.text), LINE_CHARS),
                                        entry.cache_id, entry.exit_code))
        if len(self.history) > self.max_history:
            self.older += len(self.history) - self.max_history
            del self.history[: len(self.history) - self.max_history]
        return entry

    def add_note(self, text: str, turns: int | None, turn: int) -> None:
        """Keep a note: for `turns` prompts after `turn`, or until its subtask closes."""
        until = None if turns is None else turn + max(turns, 1)
        self.notes.append({"text": clip(text.strip(), NOTE_CHARS), "until": until,
                           "scope": self.current})
        del self.notes[:-MAX_NOTES]

    def add_feedback(self, text: str) -> None:
        """A note from normalize to the model, shown in the next prompt only."""
        self.feedback.append(clip(text.strip(), FEEDBACK_CHARS))
        del self.feedback[:-4]

    def add_plan(self, steps: list[str]) -> str:
        """Add subtasks under the current one and move to the first; says what happened."""
        if not self.tracks_plan:
            return ""
        node = self._node(self.current)
        room = MAX_SUBTASKS - len(self.root.walk()) + 1
        taken = [s for s in (clip(s.strip(), TITLE_CHARS) for s in steps) if s][: max(room, 0)]
        if not taken:
            return f"the plan holds at most {MAX_SUBTASKS} subtasks; nothing was added"
        for title in taken:
            node.children.append(Subtask(self.next_id, title))
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
        node.status, node.summary = "done", clip(summary.strip(), TITLE_CHARS)
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

    def build(self, goal: str, turn: int, veto: Veto | None = None,  # noqa: ARG002
              extra_chars: int = 0) -> Prompt:  # noqa: ARG002
        """The messages for the prompt of `turn` (0-based); `veto` is asked before compacting;
        `extra_chars` (transient messages the request adds) count toward the size."""
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
                out.append(head + ("\n" + bounded("\n".join(lines), self.marker)
                                   if lines else ""))
        if self.last_prose:
            out.append("## Your last message\n" + self.last_prose)
        if shown:
            out.append("## Results of your last commands\n"
                       + "\n\n".join(r.render(self.marker) for r in shown))
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

    def _node(self, node_id: int) -> Subtask:
        for node in self.root.walk():
            if node.id == node_id:
                return node
        return self.root

    def _parent(self, node_id: int) -> Subtask:
        for node in self.root.walk():
            if any(c.id == node_id for c in node.children):
                return node
        return self.root

    def _path(self) -> list[Subtask]:
        path = [self._node(self.current)]
        while path[0].id != self.root.id:
            path.insert(0, self._parent(path[0].id))
        return path

    # -- state ---------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "strategy": self.name,
            "results": [r.to_dict() for r in self.results],
            "history": [h.to_dict() for h in self.history],
            "older": self.older,
            "notes": [dict(n) for n in self.notes],
            "feedback": list(self.feedback),
            "last_prose": self.last_prose,
            "root": self.root.to_dict(),
            "current": self.current,
            "next_id": self.next_id,
            "marker": self.marker,
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
            self.root = Subtask.from_dict(state["root"])
        self.current = int(state.get("current", 0))
        self.next_id = int(state.get("next_id", 1))
        self.marker = str(state.get("marker") or self.marker)
