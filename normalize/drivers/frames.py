"""The workflow driver's state as data: its stack of frames, what it waits for.

A frame says which step list, which step in it, which loop item or `until`
iteration; `InFlight` is the step whose actions are out, `Interrupted` a step
whose side effect was cut off.

All of it snapshots to plain JSON through `normalize.serial`. Task files
written before frames were dataclasses still load: their paths are integers
(a negative `-i - 1` meaning the `else` of step `i`) and `self` is today's
`holder` (the `_old_*` upgrades).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from normalize.execution.scope import ScopeState
from normalize.serial import Record, Shape, stored
from normalize.task import Kept, kept_value
from normalize.workflow.spec import StepSpec

KEEP_ITEMS = 64  # a changed list or table longer than this is kept beside the checkpoint
KEEP_CHARS = 4096  # and a changed text longer than this
_UNSET = object()

Branch = Literal["then", "else"]
JSON = dict[str, Any]


def _old_hop(data: Any) -> Any:
    """A hop in the shape before frames were dataclasses: `-i - 1` was the `else` of step i."""
    if isinstance(data, int):
        return [data, "then"] if data >= 0 else [-data - 1, "else"]
    if len(data) != 2 or data[1] not in ("then", "else"):
        raise ValueError(f"bad frame branch in {data!r}")
    return data


@dataclass(frozen=True)
class Hop(Record):
    """One move from a step list into step `index`: its nested steps (then) or its `else`."""

    serial_shape: ClassVar[Shape] = Shape(as_list=True, upgrade=_old_hop)
    index: int
    branch: Branch = "then"

    def steps_of(self, steps: Sequence[StepSpec]) -> Sequence[StepSpec]:
        """The step list this hop leads to from `steps`."""
        holder = steps[self.index]
        return holder.steps if self.branch == "then" else holder.otherwise



@dataclass
class ForEach(Record):
    """A `for_each` in progress: its items, the current one's index, its variable name.

    The items are computed once, when the loop starts; the snapshot hands
    them to the store as `Kept`, written once beside the task file, so a
    checkpoint holds the position and a reference, whatever the list's length.
    """

    items: list[Any] = field(metadata=stored(wrap=Kept, unwrap=kept_value))
    i: int = 0
    as_: str = field(default="item", metadata=stored(key="as"))

    @property
    def item(self) -> Any:
        return self.items[self.i]



@dataclass
class Repeat(Record):
    """An `until` loop in progress: the iteration (from 1) and the bound."""

    i: int = 1
    max: int = 10



def _old_frame(data: JSON) -> JSON:
    """A frame as stored before: `self` for `holder`; an empty scope, loop or repeat as none."""
    data = {key: value for key, value in data.items()
            if value or key not in ("scope", "loop", "repeat")}
    if "self" in data:
        data.setdefault("holder", bool(data.pop("self")))
    return data


@dataclass
class Frame(Record):
    """One level of the stack: a step list (reached by `path`) and the step `pc` in it.

    A `holder` frame runs the step at the end of its path itself, once per
    loop item or iteration (a `for_each` or `until` over a single action);
    its step list is that one step.
    """

    serial_shape: ClassVar[Shape] = Shape(upgrade=_old_frame)
    path: tuple[Hop, ...] = ()
    pc: int = 0
    scope: JSON = field(default_factory=lambda: ScopeState().to_dict())
    holder: bool = field(default=False, metadata=stored(omit_default=True))
    loop: ForEach | None = field(default=None, metadata=stored(omit_default=True))
    repeat: Repeat | None = field(default=None, metadata=stored(omit_default=True))

    def here(self, branch: Branch = "then") -> tuple[Hop, ...]:
        """The path into the current step's nested steps (or its `else`)."""
        return (*self.path, Hop(self.pc, branch))



def steps_at(steps: Sequence[StepSpec], path: tuple[Hop, ...]) -> Sequence[StepSpec]:
    """The step list that `path` leads to from the workflow's own `steps`."""
    for hop in path:
        steps = hop.steps_of(steps)
    return steps


def holders(steps: Sequence[StepSpec], path: tuple[Hop, ...]) -> list[StepSpec]:
    """The steps `path` passes through (each hop's holder), outermost first."""
    out: list[StepSpec] = []
    for hop in path:
        out.append(steps[hop.index])
        steps = hop.steps_of(steps)
    return out


@dataclass
class InFlight(Record):
    """The actions of a step that are out: one step's, a fan-out's, or an interrupt question's.

    Its JSON shape is the one task files have always had.
    """

    kind: Literal["step", "fanout", "interrupt"]
    results: list[JSON] = field(default_factory=list)  # a fan-out's results so far
    count: int = field(default=1, metadata=stored(omit_default=True))
    # how many results a fan-out waits for; its items, kept when a transform needs them
    items: list[Any] | None = field(default=None, metadata=stored(
        omit_default=True, wrap=Kept, unwrap=kept_value))



@dataclass
class Interrupted(Record):
    """A step result whose side effect was cut off: the result, the command that ran and its
    idempotency key (which a rerun sends again)."""

    result: JSON
    command: str = ""
    key: str = ""


def _keep_large(value: Any) -> Any:
    """`value` as a `Kept` when it is large (written once beside the checkpoints)."""
    if isinstance(value, str):
        return Kept(value) if len(value) > KEEP_CHARS else value
    if isinstance(value, list | dict) and len(value) > KEEP_ITEMS:
        return Kept(value)
    return value


def changed_vars(values: dict[str, Any], initial: dict[str, Any]) -> JSON:
    """The variables a run set or changed since it started (compared by identity), to store.

    The ones it started with are in the task's config, written once per run;
    a checkpoint carries only the changes, a large one kept beside it, so its
    size does not grow with a list the workflow loops over.
    """
    return {name: _keep_large(value) for name, value in values.items()
            if initial.get(name, _UNSET) is not value}


def restored_vars(stored: dict[str, Any], initial: dict[str, Any]) -> dict[str, Any]:
    """A run's variables from a snapshot's: set over the ones it started with.

    A snapshot from before held every variable; set over the same start, it
    gives the same values (one equal to its start is the start again, unchanged).
    """
    out = dict(initial)
    for name, value in stored.items():
        value = kept_value(value)
        if name not in initial or initial[name] != value:
            out[name] = value
    return out

