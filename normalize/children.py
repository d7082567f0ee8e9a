"""Sub-tasks as data: how a child was asked for, what it gave back, and who starts them.

A child is a task like any other (`Task.parent` names its parent, the parent's
`Task.children` lists it). `ChildSettings` is the typed record of how it was
asked for (isolation, merge, the checkpoint its copy was made from), kept on
the child's task; `ChildOutcome` is what the parent's action gets back.
`Spawner` is what the `spawn` tool calls; the runner provides one
(`normalize.spawner`), so the tools never reach the store or the executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

    @property
    def ok(self) -> bool:
        return self.status == "done" and not self.conflicts and self.error is None

    def text(self) -> str:
        """The action's output: what the model reads."""
        lines = [f"child {self.child_id} {self.status} after {self.turns} turn(s), "
                 f"${self.cost_usd:.4f}: {self.summary or '(no summary)'}"]
        if self.error:
            lines.append(f"error: {self.error}")
        if self.diff_stat:
            lines.append(("applied to the workspace:\n" if self.applied else "its changes:\n")
                         + self.diff_stat)
        elif self.status == "done":
            lines.append("it changed no files")
        if self.conflicts:
            lines.append("not applied (nothing of it): conflicts with the workspace in")
            lines += [f"  {c}" for c in self.conflicts]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = encode(self)
        return data


class Spawner(Protocol):
    """Starts a child task for a parent's action and waits for its outcome.

    `record` journals an event in the parent's journal, fsynced (the child's
    creation before it starts, its outcome when collected).
    """

    def spawn(self, request: SpawnRequest, record: Callable[[Event], None]) -> ChildOutcome:
        ...
