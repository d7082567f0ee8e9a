"""The persisted data: Task, Action, Decision, ActionResult and their statuses.

Everything here is plain data that round-trips through JSON (`to_dict` /
`from_dict`, derived from the fields by `normalize.serial`). A task file holds
the current state only; the history of a task lives in its journal (see
`normalize.store`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

from normalize.keys import INT, NUM, key, positive
from normalize.serial import Record, Shape, copied, stored
from normalize.statuses import SCHEMA_VERSION as SCHEMA_VERSION  # (they live apart: light)
from normalize.statuses import TaskStatus as TaskStatus
from normalize.structured import OutputContract
from normalize.subtasks.children import ChildSettings

JSON = dict[str, Any]


class ResultStatus(StrEnum):
    """How one action ended."""

    SUCCESS = "success"
    ERROR = "error"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


@dataclass
class Action(Record):
    """One thing to do: a tool and its parameters.

    `params` holds `args` (the command's words after the verb) and `body` (a
    heredoc or fenced block) for actions parsed from command text; tools may
    also accept structured keys. `text` is the command as written. `key` is
    unique within the task, assigned by the engine. `idempotency` is what a
    program is told the action's idempotency key is: empty for the key of its
    own, or the key of the action it runs again (a step retried, or rerun after
    a crash cut it short), so the same step sends the same key every time.
    """

    tool: str
    params: JSON = field(default_factory=dict, metadata=stored(wrap=copied))
    text: str = ""
    key: str = ""
    idempotency: str = ""

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.params.get("args", [])]

    @property
    def body(self) -> str | None:
        body = self.params.get("body")
        return None if body is None else str(body)



@dataclass
class Wait(Record):
    """A question the task waits on: from `ask`, or an approval request."""

    kind: str  # "question" | "approval" | "interrupt"
    question: str
    action: Action | None = None
    answer: str | None = None



@dataclass
class ActionResult(Record):
    """How an action ended and what it produced.

    `output` is the full text; `preview` is what readers see when the output is
    long, with `cache_id` naming the full text for `fetch`. `data` carries
    structured extras (a diff, a question, captured fields).
    """

    status: ResultStatus
    output: str = ""
    preview: str = ""
    cache_id: str | None = None
    duration: float = 0.0
    exit_code: int | None = None
    error: str | None = None
    data: JSON = field(default_factory=dict)
    wait: Wait | None = None

    @property
    def ok(self) -> bool:
        return self.status is ResultStatus.SUCCESS

    @property
    def shown(self) -> str:
        """The text a reader sees: the preview when there is one, else the output."""
        return self.preview or self.output or (self.error or "")

    @classmethod
    def success(cls, output: str = "", **kw: Any) -> ActionResult:
        return cls(ResultStatus.SUCCESS, output, **kw)

    @classmethod
    def failure(cls, error: str, output: str = "", **kw: Any) -> ActionResult:
        return cls(ResultStatus.ERROR, output, error=error, **kw)

    @classmethod
    def blocked(cls, reason: str, **kw: Any) -> ActionResult:
        return cls(ResultStatus.BLOCKED, "", error=reason, **kw)


@dataclass
class Decision(Record):
    """What a driver returns each step.

    `done` ends the run after the actions (if any) ran; `status` says how it
    ends (done, failed, stuck) and `summary` why. `thinking` is prose kept for
    display and history, never executed.
    """

    actions: list[Action] = field(default_factory=list)
    thinking: str = ""
    parallel: bool = False
    done: bool = False
    status: TaskStatus = TaskStatus.DONE
    summary: str = ""
    max_concurrency: int = 0  # > 0: a workflow fan-out, side-effecting actions run together too
    result: Any = None  # a done decision's structured result (`--output-schema`), validated

    @classmethod
    def finish(cls, summary: str = "", status: TaskStatus = TaskStatus.DONE,
               result: Any = None) -> Decision:
        return cls(done=True, status=status, summary=summary, result=result)



@dataclass
class Usage(Record):
    """Tokens and cost spent by a task across all its runs."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0
    children_cost_usd: float = field(default=0.0, metadata=stored(omit_default=True))
    """What its collected sub-tasks spent (their own `cost_usd`), counted against its budget."""

    @property
    def total_cost_usd(self) -> float:
        """Its own cost and its children's: what counts against its budget."""
        return self.cost_usd + self.children_cost_usd

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


_POSITIVE = positive("{key} must be positive, not {value}")


@dataclass
class Limits(Record):
    """Ceilings on one task (`[workflow.limits]`); `None` means unbounded.

    `driver` names the driver they were set for (`--max-turns` on the command
    line); then they bind that driver only. Without it they bind every driver
    that is bound by limits (a person at the prompt is not).
    """

    max_turns: int | None = key(None, INT, "model turns (or steps) at most", _POSITIVE,
                                omit_default=False)
    max_tokens: int | None = key(None, INT, "tokens in all at most", _POSITIVE,
                                 omit_default=False)
    max_cost_usd: float | None = key(None, NUM, "dollars in all at most", _POSITIVE,
                                     omit_default=False)
    timeout_seconds: float | None = key(None, NUM, "seconds of the run at most", _POSITIVE,
                                        omit_default=False)
    driver: str | None = None  # not a key of the file: `--max-turns` binds one driver



class Kept:
    """A large value fixed for a while (a loop's items) inside a driver's snapshot.

    The store writes it once, beside the task file (`tasks/ID/kept-HASH.json`),
    and checkpoints name it, so a checkpoint's size does not grow with it.
    Loading gives the plain value back. Treated as immutable: copies share it.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> Kept:
        return self

    def __eq__(self, other: object) -> bool:
        return bool(self.value == (other.value if isinstance(other, Kept) else other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Kept({type(self.value).__name__} of {len(self.value)})" \
            if hasattr(self.value, "__len__") else f"Kept({self.value!r})"


def kept_value(value: Any) -> Any:
    """The plain value of a `Kept` (or the value itself)."""
    return value.value if isinstance(value, Kept) else value


_OMIT = stored(omit_default=True)


@dataclass(frozen=True)
class TaskConfig(Record):
    """What a task was started with and keeps across resumes (stored as `driver_config`).

    A new value replaces the whole (`dataclasses.replace`), so the store sees
    a change by identity. `to_driver_json` is what a driver's `from_config` is
    given: plain JSON, the plugin contract (docs/plugins.md).
    """

    spec: JSON | None = field(default=None, metadata=_OMIT)
    """The workflow as validated (`WorkflowSpec.to_dict()`); None for a bare driver."""
    permissions: JSON | None = field(default=None, metadata=_OMIT)
    """The resolved permissions (`Permissions.to_dict()`); None in a task from before."""
    mcp_servers: tuple[JSON, ...] | None = field(default=None, metadata=_OMIT)
    """The MCP server tables the run uses; None when none were recorded."""
    permission_notes: tuple[str, ...] = field(default=(), metadata=_OMIT)
    """What was ignored, and why: shown as warnings when the task first runs."""
    project_instructions: bool = field(default=True, metadata=_OMIT)
    """Whether AGENTS.md / CLAUDE.md join the prompt (`--no-project-instructions`)."""
    follow_ups: tuple[str, ...] = field(default=(), metadata=_OMIT)
    """Instructions given after the goal (`resume ID "…"`), in order."""
    approve: str | None = field(default=None, metadata=_OMIT)
    """`--approve` of a task from before permissions were recorded."""
    llm: JSON | None = field(default=None, metadata=_OMIT)
    """Model settings of a task whose spec has none (`resume --model`)."""
    extra: JSON = field(default_factory=dict, metadata=_OMIT)
    """Keys nothing here declares (a plugin's, a Python caller's), kept as they were."""

    @property
    def spec_table(self) -> JSON:
        """The workflow spec, or an empty table for a task without one."""
        return self.spec or {}

    def to_driver_json(self) -> JSON:
        """The config as the plain JSON a driver is built from (`extra` at the top level)."""
        data: JSON = self.to_dict()
        extra = data.pop("extra", {})
        return {**extra, **data}

    @classmethod
    def from_driver_json(cls, data: Mapping[str, Any]) -> TaskConfig:
        """A config from plain JSON: the declared keys typed, every other key kept in `extra`."""
        declared = {f.name for f in fields(cls)} - {"extra"}
        extra = {**data.get("extra", {}), **{k: v for k, v in data.items()
                                             if k not in declared and k != "extra"}}
        return cls.from_dict({**{k: v for k, v in data.items() if k in declared},
                              "extra": extra})


def new_task_id() -> str:
    """A short random id: 8 lowercase hex digits."""
    return os.urandom(4).hex()  # (as secrets.token_hex, without loading hmac and random)


_TASK_DEFAULTS = {"goal": "", "created_at": 0.0, "updated_at": 0.0}  # absent from old files


@dataclass
class Task(Record):
    """The persisted unit of work. Plain data; see the module docstring."""

    serial_shape: ClassVar[Shape] = Shape(upgrade=lambda data: {**_TASK_DEFAULTS, **data})

    id: str
    goal: str
    workspace: str
    driver: str
    config: TaskConfig = field(default_factory=TaskConfig,
                               metadata=stored(key="driver_config"))
    driver_states: dict[str, JSON] = field(default_factory=dict)
    scope_state: JSON = field(default_factory=dict)
    status: TaskStatus = TaskStatus.PENDING
    turn: int = 0
    actions_run: int = 0
    seq: int = 0
    journal_offset: int = 0
    epoch: int = 0
    inflight: JSON | None = None
    usage: Usage = field(default_factory=Usage)
    limits: Limits = field(default_factory=Limits)
    pending: Wait | None = None
    summary: str = ""
    error: str | None = None
    workflow: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    elapsed: float = 0.0
    parent: str | None = None  # the task that started this one (a sub-task)
    children: list[str] = field(default_factory=list)  # the sub-tasks it started, in order
    child: ChildSettings | None = None  # how its parent asked for it
    output: OutputContract | None = field(default=None, metadata=_OMIT)
    """The schema its result must meet (`--output-schema`)."""
    result: Any = field(default=None, metadata=_OMIT)
    """The validated structured result."""
    schema_version: int = field(default=SCHEMA_VERSION, compare=False,
                                metadata=stored(fixed=lambda: SCHEMA_VERSION))
    # the file is always written in the current format (`store.migrations` brings older ones)

    @classmethod
    def new(cls, goal: str, workspace: str, driver: str, **kw: Any) -> Task:
        return cls(id=new_task_id(), goal=goal, workspace=workspace, driver=driver, **kw)

    @property
    def driver_state(self) -> JSON:
        """The saved state of the current driver (empty when it has not driven this task)."""
        return self.driver_states.get(self.driver, {})

    @driver_state.setter
    def driver_state(self, state: JSON) -> None:
        self.driver_states[self.driver] = state
