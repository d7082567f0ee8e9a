"""Sub-tasks as data: how a child was asked for, what it gave back, and who starts them.

A child is a task like any other (`Task.parent` names its parent, the parent's
`Task.children` lists it). `ChildSettings` is the typed record of how it was
asked for (isolation, merge, the checkpoint its copy was made from), kept on
the child's task; `ChildOutcome` is what the parent's action gets back.
`Spawner` is what the `spawn` tool calls; the runner provides one
(`normalize.subtasks.spawner`), so the tools never reach the store or the executor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from normalize.serial import Record, encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from normalize.events import Event

Merge = Literal["apply", "none"]

MAX_CHILDREN = 8
"""Children one task may start, in all."""
MAX_DEPTH = 2
"""How deep children may nest: a child of a child of the person's task, no deeper."""
MAX_CONCURRENCY = 4
"""Children of one task running at once (`NORMALIZE_MAX_CONCURRENCY` overrides)."""
DEFAULT_TURNS = 30
"""A child's turns when the spawn names none."""
BUDGET_SHARE = 0.5
"""A child's budget, when the spawn names none: this share of what the parent has left."""


@dataclass
class ChildSettings(Record):
    """How a child task was asked for; stored on the child (plain data, JSON round-trip)."""

    key: str = ""  # the parent's action that started it
    depth: int = 1
    isolated: bool = False
    merge: Merge = "apply"
    keep: bool = False
    base: str = ""  # the workspace tree the copy was made from (isolated children)
    origin: str = ""  # the parent's workspace (an isolated child works in a copy of it)


@dataclass(frozen=True)
class SpawnRequest:
    """What a `spawn` action asks for (parsed by the tool)."""

    goal: str
    key: str
    model: str | None = None
    budget_usd: float | None = None
    max_turns: int | None = None
    isolated: bool = False
    merge: Merge = "apply"
    keep: bool = False
    attempts: int = 1  # best-of-N: this many isolated children try the same goal
    pick: str = ""  # the command that judges each finished attempt in its copy (exit 0: passes)
    answer: str = ""  # a person's answer to the child's question (`resume PARENT --answer`)
    workflow: dict[str, Any] | None = None  # the child runs these steps (a workflow's item)


@dataclass
class Attempt:
    """One of a best-of-N spawn's children, as compared."""

    number: int
    child_id: str
    status: str
    cost_usd: float = 0.0
    diff_stat: str = ""
    diff_lines: int = 0  # lines added and removed
    pick_exit: int | None = None  # the pick command's exit status (None: not run)
    picked: bool = False
    disqualified: str = ""  # the file it changed that the pick reads (the pick did not run)

    @property
    def passes(self) -> bool:
        """Whether it may be picked: it ended done, did not change what the pick reads, and its
        pick command (if any) exited 0."""
        return self.status == "done" and not self.disqualified and self.pick_exit in (None, 0)

    def row(self) -> str:
        """One line of the side-by-side comparison."""
        pick = "-" if self.pick_exit is None else f"exit {self.pick_exit}"
        if self.disqualified:
            pick = f"disqualified (changed {self.disqualified})"
        files = self.diff_stat.splitlines()[-1].strip() if self.diff_stat else "no changes"
        mark = "picked" if self.picked else ""
        return (f"#{self.number} {self.child_id}  {self.status:<13} pick: {pick:<8} "
                f"${self.cost_usd:.4f}  {files}  {mark}").rstrip()


PICK_RULE = ("the best attempt is one that ended done and whose pick command exited 0 "
             "(without --pick: every attempt that ended done); among those the smallest "
             "diff (lines added and removed), then the lowest attempt number. An attempt "
             "that changed what the pick reads is disqualified: a file the pick command "
             "names, a test runner's configuration (conftest.py, pytest.ini, tox.ini, "
             "setup.cfg, pyproject.toml, …) or a test file the attempts started with")


def best_attempt(attempts: list[Attempt]) -> Attempt | None:
    """The attempt `PICK_RULE` picks, or None when none passes."""
    passing = [a for a in attempts if a.passes]
    return min(passing, key=lambda a: (a.diff_lines, a.number), default=None)


@dataclass
class ChildOutcome:
    """What a collected child gave back to its parent's action."""

    child_id: str
    status: str
    summary: str = ""
    cost_usd: float = 0.0
    turns: int = 0
    diff_stat: str = ""
    applied: bool = False
    conflicts: list[str] = field(default_factory=list)  # "FILE: hunk @@ … @@" per refusal
    error: str | None = None
    attempts: list[Attempt] = field(default_factory=list)  # best-of-N: every attempt compared
    question: str = ""  # what a waiting child asks (its parent waits on it too)
    unmerged: str = ""  # why its changes could not be written (none of them was)

    @property
    def ok(self) -> bool:
        return self.status == "done" and not self.conflicts and self.error is None and \
            not self.unmerged

    def text(self) -> str:
        """The action's output: what the model reads."""
        lines = [f"child {self.child_id} {self.status} after {self.turns} turn(s), "
                 f"${self.cost_usd:.4f}: {self.summary or '(no summary)'}"]
        picked = [a for a in self.attempts if a.picked]
        if picked:  # best-of-N: which attempt this is, first
            lines[0] = f"attempt #{picked[0].number} of {len(self.attempts)} picked: {lines[0]}"
        if self.question:
            lines.append(f"it asks: {self.question}")
        if self.error:
            lines.append(f"error: {self.error}")
        if self.diff_stat:
            lines.append(("applied to the workspace:\n" if self.applied else "its changes:\n")
                         + self.diff_stat)
        elif self.status == "done":
            lines.append("it changed no files")
        if self.unmerged:
            lines.append(f"not applied (nothing of it): {self.unmerged}")
        if self.conflicts:
            lines.append("not applied (nothing of it): conflicts with the workspace in")
            lines += [f"  {c}" for c in self.conflicts]
        if self.attempts:
            lines.append(f"{len(self.attempts)} attempts (picked: ended done, pick exit 0, "
                         f"then the smallest diff, then the first):")
            lines += [f"  {a.row()}" for a in self.attempts]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = encode(self)
        return data


_LATER: dict[str, Any] = {"attempts": 1, "pick": "", "workflow": None}
"""Request fields added later: left out of the id at their defaults, so ids stay as they were."""


def child_id_for(parent_id: str, request: SpawnRequest) -> str:
    """The id of the child a parent's action starts: the same every time that action runs.

    The request is part of it, so a different spawn at the same place (the
    model's new decision after `resume --rewind`) makes a new child; the
    answer to its question is not (the same child goes on with it).
    """
    import hashlib  # (as the store does: loaded by the writes only)

    asked = {k: v for k, v in asdict(request).items()
             if k != "answer" and (k not in _LATER or v != _LATER[k])}
    said = repr(sorted(asked.items()))
    return hashlib.sha256(f"{parent_id}/{said}".encode()).hexdigest()[:8]


class Spawner(Protocol):
    """Starts a child task for a parent's action and waits for its outcome.

    `record` journals an event in the parent's journal, fsynced (the child's
    creation before it starts, its outcome when collected).
    """

    def spawn(self, request: SpawnRequest, record: Callable[[Event], None]) -> ChildOutcome:
        ...
