"""The parsed form of a workflow file: plain data that round-trips through JSON.

A task stores its workflow's spec (not the file's path alone), so a resumed
task runs the workflow it started with even if the file changed since. A
spec read back from JSON keeps its top-level steps as the dicts they were
(`StepList`) and decodes each when it is first reached, so resuming a long
workflow costs the steps it runs, not all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self, overload

from normalize.hooks import Hook
from normalize.mcp.config import ServerSpec
from normalize.serial import Record, Shape, decode, encode
from normalize.tables import (
    CacheSettings,
    ContextSettings,
    LLMTable,
    PermissionsTable,
    RetrySettings,
)
from normalize.task import Limits

JSON = dict[str, Any]


@dataclass
class StepSpec(Record):
    """One entry of `[[workflow.steps]]` (or of a nested `steps`).

    Stored (`to_dict`), it keeps only the fields that differ from their
    defaults: a long workflow's spec is read back at every resume, and most
    of a step's two dozen fields are unset.
    """

    serial_shape: ClassVar[Shape] = Shape(omit_defaults=True)

    name: str
    action: str | None = None
    capture: str | None = None
    transform: str | None = None
    on_error: str = "fail"
    on_interrupt: str | None = None
    condition: str | None = None
    for_each: str | None = None
    as_: str = "item"
    parallel: bool = False
    max_concurrency: int = 4
    steps: list[StepSpec] = field(default_factory=list)
    context: str | None = None
    cache: str | None = None
    retry: RetrySettings | None = None  # the step's own `retry` table (None: inherited)
    timeout: float | None = None
    workflow: str | None = None
    prompt: str | None = None
    max_turns: int | None = None
    until: str | None = None  # repeat the step (or its nested steps) until this holds
    max_iterations: int | None = None  # the bound of an `until` loop
    otherwise: list[StepSpec] = field(default_factory=list)  # `else`: when `condition` fails
    isolation: str | None = None  # "isolated": each item (or the nested workflow) a sub-task
    merge: str = "apply"  # an isolated sub-task's changes: applied, or only reported ("none")
    schema: JSON | None = None  # the JSON Schema a captured value must meet (`schema = FILE`)
    line: int = 0

    @property
    def is_group(self) -> bool:
        """Whether the step holds nested steps (a scope) rather than one action."""
        return bool(self.steps)


class StepList(Sequence[StepSpec]):
    """A workflow's steps as stored (dicts), each decoded to a `StepSpec` when first used."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: list[JSON]) -> None:
        self._raw = raw
        self._decoded: list[StepSpec | None] = [None] * len(raw)

    def __len__(self) -> int:
        return len(self._raw)

    @overload
    def __getitem__(self, index: int) -> StepSpec: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepSpec]: ...

    def __getitem__(self, index: int | slice) -> StepSpec | list[StepSpec]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._raw)))]
        step = self._decoded[index]
        if step is None:
            step = self._decoded[index] = StepSpec.from_dict(self._raw[index])
        return step

    def __iter__(self) -> Iterator[StepSpec]:
        return (self[i] for i in range(len(self._raw)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (StepList, list)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the list it stands for)

    def decoded(self) -> int:
        """How many steps have been decoded so far."""
        return sum(step is not None for step in self._decoded)

    def to_dicts(self) -> list[JSON]:
        """The steps as JSON: a step never decoded is its stored dict, as it was."""
        return [raw if step is None else step.to_dict()
                for raw, step in zip(self._raw, self._decoded, strict=True)]


@dataclass
class TransitionSpec(Record):
    """One `[[states.transitions]]` entry."""

    next: str
    condition: str = "always"
    line: int = 0


@dataclass
class StateSpec(Record):
    """One `[[states]]` entry."""

    name: str
    action: str | None = None
    transitions: list[TransitionSpec] = field(default_factory=list)
    terminal: bool = False
    status: str = "done"  # how reaching this terminal state ends the task
    summary: str | None = None
    on_entry: str | None = None
    on_exit: str | None = None
    capture: str | None = None
    timeout: float | None = None
    on_interrupt: str | None = None
    workflow: str | None = None
    prompt: str | None = None
    max_turns: int | None = None
    line: int = 0


@dataclass
class WorkflowSpec(Record):
    """A whole workflow file, validated: its `[workflow]` sub-tables typed (`normalize.tables`)."""

    name: str
    path: str
    driver: str
    description: str = ""
    version: int = 1
    vars: JSON = field(default_factory=dict)
    context: ContextSettings = field(default_factory=ContextSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    limits: Limits = field(default_factory=Limits)
    llm: LLMTable | None = None
    permissions: PermissionsTable = field(default_factory=PermissionsTable)
    on_interrupt: str | None = None
    mcp: tuple[ServerSpec, ...] = ()  # [[workflow.mcp]]: the MCP servers it uses
    hooks: tuple[Hook, ...] = ()  # [[workflow.hooks]]: run if trusted
    output_schema: str | None = None  # the result's JSON Schema file (beside the workflow)
    output_retries: int | None = None  # how often an invalid result goes back (None: default)
    workspace: str = ""  # a batch item's: dir:{item.path}, clone:{item.repo}, copy
    on_item_error: str = "continue"  # a batch's, when an item fails: continue or stop
    memory_top_k: int | None = None  # memory entries per model request (None: the config's)
    memory: str | None = None  # what a success does with candidates: inbox, auto, off
    skills: tuple[str, ...] = ()  # Agent Skills a model-driven run loads before its first turn
    steps: Sequence[StepSpec] = field(default_factory=list)  # a StepList when read from JSON
    states: list[StateSpec] = field(default_factory=list)
    includes: JSON = field(default_factory=dict)  # nested workflow files, by path
    origin: str = ""  # how it was found (see workflow.catalog.Located); "" = handed in by code
    shadowed: str = ""  # an untrusted workspace file of the same name that was passed over

    def to_dict(self) -> JSON:
        data: JSON = encode(replace(self, steps=[], vars={}))
        data["vars"] = dict(self.vars)  # plain JSON already: not copied item by item
        steps = self.steps
        data["steps"] = steps.to_dicts() if isinstance(steps, StepList) else \
            [step.to_dict() for step in steps]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The spec a task stored; its steps are decoded as they are reached (`StepList`)."""
        spec = decode(cls, {**data, "steps": []})
        spec.steps = StepList(list(data.get("steps", [])))
        return spec
