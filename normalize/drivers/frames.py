"""The workflow driver's state as data: its stack of frames, what it waits for.

A frame says which step list, which step in it, which loop item or `until`
iteration; `Pending` is the step whose actions are out, `Interrupted` a step
whose side effect was cut off.

All of it snapshots to plain JSON. Task files written before
frames were dataclasses still load: their paths are integers (a negative
`-i - 1` meaning the `else` of step `i`) and `self` is today's `holder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from normalize.execution.scope import ScopeState
from normalize.task import Kept, kept_value
from normalize.workflow.spec import StepSpec

Branch = Literal["then", "else"]
JSON = dict[str, Any]


@dataclass(frozen=True)
class Hop:
    """One move from a step list into step `index`: its nested steps (then) or its `else`."""

    index: int
    branch: Branch = "then"

    def steps_of(self, steps: Sequence[StepSpec]) -> Sequence[StepSpec]:
        """The step list this hop leads to from `steps`."""
        holder = steps[self.index]
        return holder.steps if self.branch == "then" else holder.otherwise

    def to_json(self) -> list[Any]:
        return [self.index, self.branch]

    @classmethod
    def from_json(cls, data: Any) -> Hop:
        if isinstance(data, int):  # the old shape: -i - 1 was the `else` of step i
            return cls(data, "then") if data >= 0 else cls(-data - 1, "else")
        index, branch = data
        if branch not in ("then", "else"):
            raise ValueError(f"bad frame branch {branch!r}")
        return cls(int(index), branch)


@dataclass
class Loop:
    """A `for_each` in progress: its items, the current one's index, its variable name.

    The items are computed once, when the loop starts; the snapshot hands
    them to the store as `Kept`, written once beside the task file, so a
    checkpoint holds the position and a reference, whatever the list's length.
    """

    items: list[Any]
    i: int = 0
    as_: str = "item"

    @property
    def item(self) -> Any:
        return self.items[self.i]

    def to_json(self) -> JSON:
        return {"items": Kept(self.items), "i": self.i, "as": self.as_}

    @classmethod
    def from_json(cls, data: JSON) -> Loop:
        # old task files hold the list itself; it is kept apart from the next checkpoint on
        return cls(list(kept_value(data["items"])), int(data.get("i", 0)),
                   str(data.get("as", "item")))


@dataclass
class Repeat:
    """An `until` loop in progress: the iteration (from 1) and the bound."""

    i: int = 1
    max: int = 10

    def to_json(self) -> JSON:
        return {"i": self.i, "max": self.max}

    @classmethod
    def from_json(cls, data: JSON) -> Repeat:
        return cls(int(data.get("i", 1)), int(data.get("max", 10)))


@dataclass
class Frame:
    """One level of the stack: a step list (reached by `path`) and the step `pc` in it.

    A `holder` frame runs the step at the end of its path itself, once per
    loop item or iteration (a `for_each` or `until` over a single action);
    its step list is that one step.
    """

    path: tuple[Hop, ...] = ()
    pc: int = 0
    scope: JSON = field(default_factory=lambda: ScopeState().to_dict())
    holder: bool = False
    loop: Loop | None = None
    repeat: Repeat | None = None

    def here(self, branch: Branch = "then") -> tuple[Hop, ...]:
        """The path into the current step's nested steps (or its `else`)."""
        return (*self.path, Hop(self.pc, branch))

    def to_json(self) -> JSON:
        data: JSON = {"path": [h.to_json() for h in self.path], "pc": self.pc,
                      "scope": self.scope}
        if self.holder:
            data["holder"] = True
        if self.loop is not None:
            data["loop"] = self.loop.to_json()
        if self.repeat is not None:
            data["repeat"] = self.repeat.to_json()
        return data

    @classmethod
    def from_json(cls, data: JSON) -> Frame:
        """A frame from a snapshot, in today's shape or the one before dataclasses."""
        loop, repeat = data.get("loop"), data.get("repeat")
        return cls(
            path=tuple(Hop.from_json(h) for h in data.get("path", ())),
            pc=int(data.get("pc", 0)),
            scope=dict(data.get("scope") or ScopeState().to_dict()),
            holder=bool(data.get("holder", data.get("self", False))),
            loop=Loop.from_json(loop) if loop else None,
            repeat=Repeat.from_json(repeat) if repeat else None,
        )


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
class Pending:
    """The actions of a step that are out: one step's, a fan-out's, or an interrupt question's.

    Its JSON shape is the one task files have always had.
    """

    kind: Literal["step", "fanout", "interrupt"]
    results: list[JSON] = field(default_factory=list)  # a fan-out's results so far
    count: int = 1  # how many results a fan-out waits for
    items: list[Any] | None = None  # a fan-out's items, kept when a transform needs them

    def to_json(self) -> JSON:
        data: JSON = {"kind": self.kind, "results": self.results}
        if self.kind == "fanout":
            data.update(count=self.count,
                        items=None if self.items is None else Kept(self.items))
        return data

    @classmethod
    def from_json(cls, data: JSON | None) -> Pending | None:
        if not data:
            return None
        kind = data.get("kind")
        if kind not in ("step", "fanout", "interrupt"):
            raise ValueError(f"bad pending kind {kind!r}")
        return cls(kind, list(data.get("results", [])), int(data.get("count", 1)),
                   kept_value(data.get("items")))


@dataclass
class Interrupted:
    """A step result whose side effect was cut off: the result and the command that ran."""

    result: JSON
    command: str = ""

    def to_json(self) -> JSON:
        return {"result": self.result, "command": self.command}

    @classmethod
    def from_json(cls, data: JSON | None) -> Interrupted | None:
        return None if not data else cls(dict(data["result"]), str(data.get("command") or ""))
