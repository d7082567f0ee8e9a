"""The parsed form of a workflow file: plain data that round-trips through JSON.

A task stores its workflow's spec (not the file's path alone), so a resumed
task runs the workflow it started with even if the file changed since.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass
class StepSpec:
    """One entry of `[[workflow.steps]]` (or of a nested `steps`)."""

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
    retry: JSON | None = None
    timeout: float | None = None
    workflow: str | None = None
    prompt: str | None = None
    max_turns: int | None = None
    until: str | None = None  # repeat the step (or its nested steps) until this holds
    max_iterations: int | None = None  # the bound of an `until` loop
    otherwise: list[StepSpec] = field(default_factory=list)  # `else`: when `condition` fails
    line: int = 0

    @property
    def is_group(self) -> bool:
        """Whether the step holds nested steps (a scope) rather than one action."""
        return bool(self.steps)

    def to_dict(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSON) -> StepSpec:
        data = dict(data)
        data["steps"] = [StepSpec.from_dict(s) for s in data.get("steps", [])]
        data["otherwise"] = [StepSpec.from_dict(s) for s in data.get("otherwise", [])]
        return cls(**data)


@dataclass
class TransitionSpec:
    """One `[[states.transitions]]` entry."""

    next: str
    condition: str = "always"
    line: int = 0


@dataclass
class StateSpec:
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

    def to_dict(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSON) -> StateSpec:
        data = dict(data)
        data["transitions"] = [TransitionSpec(**t) for t in data.get("transitions", [])]
        return cls(**data)


@dataclass
class WorkflowSpec:
    """A whole workflow file, validated."""

    name: str
    path: str
    driver: str
    description: str = ""
    version: int = 1
    vars: JSON = field(default_factory=dict)
    context: JSON = field(default_factory=dict)
    cache: JSON = field(default_factory=dict)
    retry: JSON = field(default_factory=dict)
    limits: JSON = field(default_factory=dict)
    llm: JSON | None = None
    permissions: JSON = field(default_factory=dict)
    on_interrupt: str | None = None
    mcp: list[JSON] = field(default_factory=list)  # [[workflow.mcp]]: the MCP servers it uses
    steps: list[StepSpec] = field(default_factory=list)
    states: list[StateSpec] = field(default_factory=list)
    includes: JSON = field(default_factory=dict)  # nested workflow files, by path
    origin: str = ""  # how it was found (see workflow.catalog.Located); "" = handed in by code
    shadowed: str = ""  # an untrusted workspace file of the same name that was passed over

    def to_dict(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSON) -> WorkflowSpec:
        data = dict(data)
        data["steps"] = [StepSpec.from_dict(s) for s in data.get("steps", [])]
        data["states"] = [StateSpec.from_dict(s) for s in data.get("states", [])]
        return cls(**data)
