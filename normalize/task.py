"""The persisted data: Task, Action, Decision, ActionResult and their statuses.

Everything here is plain data that round-trips through JSON (`to_dict` /
`from_dict`). A task file holds the current state only; the history of a task
lives in its journal (see `normalize.store`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from normalize.errors import ExitStatus
from normalize.structured import OutputContract

SCHEMA_VERSION = 2
"""Version of the task file format; bumped with a migration in `store.migrations`.

2: `driver_states` keeps each driver's state by driver name (1 had one `driver_state`),
   so a task handed to another driver and back resumes where each left off.
"""

JSON = dict[str, Any]


class TaskStatus(StrEnum):
    """Where a task stands."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    LIMIT = "limit_reached"
    STUCK = "stuck"

    @property
    def resumable(self) -> bool:
        """Whether `normalize resume` can continue a task in this status."""
        return self not in (TaskStatus.DONE,)

    @property
    def exit_status(self) -> ExitStatus:
        return _EXIT_BY_STATUS[self]


_EXIT_BY_STATUS = {
    TaskStatus.PENDING: ExitStatus.FAILED,
    TaskStatus.RUNNING: ExitStatus.FAILED,
    TaskStatus.WAITING: ExitStatus.WAITING,
    TaskStatus.DONE: ExitStatus.DONE,
    TaskStatus.FAILED: ExitStatus.FAILED,
    TaskStatus.INTERRUPTED: ExitStatus.INTERRUPTED,
    TaskStatus.LIMIT: ExitStatus.LIMIT,
    TaskStatus.STUCK: ExitStatus.STUCK,
}


class ResultStatus(StrEnum):
    """How one action ended."""

    SUCCESS = "success"
    ERROR = "error"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


@dataclass
class Action:
    """One thing to do: a tool and its parameters.

    `params` holds `args` (the command's words after the verb) and `body` (a
    heredoc or fenced block) for actions parsed from command text; tools may
    also accept structured keys. `text` is the command as written. `key` is an
    idempotency key unique within the task, assigned by the engine.
    """

    tool: str
    params: JSON = field(default_factory=dict)
    text: str = ""
    key: str = ""

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.params.get("args", [])]

    @property
    def body(self) -> str | None:
        body = self.params.get("body")
        return None if body is None else str(body)

    def to_dict(self) -> JSON:
        # by hand: `asdict`'s deep copy was a tenth of an engine step
        params = {k: list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
                  for k, v in self.params.items()}
        return {"tool": self.tool, "params": params, "text": self.text, "key": self.key}

    @classmethod
    def from_dict(cls, data: JSON) -> Action:
        return cls(
            tool=data["tool"],
            params=dict(data.get("params", {})),
            text=data.get("text", ""),
            key=data.get("key", ""),
        )


@dataclass
class Wait:
    """A question the task waits on: from `ask`, or an approval request."""

    kind: str  # "question" | "approval" | "interrupt"
    question: str
    action: Action | None = None
    answer: str | None = None

    def to_dict(self) -> JSON:
        return {
            "kind": self.kind,
            "question": self.question,
            "action": None if self.action is None else self.action.to_dict(),
            "answer": self.answer,
        }

    @classmethod
    def from_dict(cls, data: JSON) -> Wait:
        action = data.get("action")
        return cls(
            kind=data["kind"],
            question=data["question"],
            action=None if action is None else Action.from_dict(action),
            answer=data.get("answer"),
        )


@dataclass
class ActionResult:
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

    def to_dict(self) -> JSON:
        return {
            "status": self.status.value,
            "output": self.output,
            "preview": self.preview,
            "cache_id": self.cache_id,
            "duration": self.duration,
            "exit_code": self.exit_code,
            "error": self.error,
            "data": self.data,
            "wait": None if self.wait is None else self.wait.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: JSON) -> ActionResult:
        wait = data.get("wait")
        return cls(
            status=ResultStatus(data["status"]),
            output=data.get("output", ""),
            preview=data.get("preview", ""),
            cache_id=data.get("cache_id"),
            duration=float(data.get("duration", 0.0)),
            exit_code=data.get("exit_code"),
            error=data.get("error"),
            data=dict(data.get("data", {})),
            wait=None if wait is None else Wait.from_dict(wait),
        )

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
class Decision:
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

    def to_dict(self) -> JSON:
        return {
            "actions": [a.to_dict() for a in self.actions],
            "thinking": self.thinking,
            "parallel": self.parallel,
            "done": self.done,
            "status": self.status.value,
            "summary": self.summary,
            "max_concurrency": self.max_concurrency,
        }

    @classmethod
    def from_dict(cls, data: JSON) -> Decision:
        return cls(
            actions=[Action.from_dict(a) for a in data.get("actions", [])],
            thinking=data.get("thinking", ""),
            parallel=bool(data.get("parallel", False)),
            done=bool(data.get("done", False)),
            status=TaskStatus(data.get("status", "done")),
            summary=data.get("summary", ""),
        )


@dataclass
class Usage:
    """Tokens and cost spent by a task across all its runs."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> JSON:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens, "cost_usd": self.cost_usd,
                "requests": self.requests}

    @classmethod
    def from_dict(cls, data: JSON) -> Usage:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Limits:
    """Ceilings on one task; `None` means unbounded.

    `driver` names the driver they were set for (`--max-turns` on the command
    line); then they bind that driver only. Without it they bind every driver
    that is bound by limits (a person at the prompt is not).
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    timeout_seconds: float | None = None
    driver: str | None = None

    def to_dict(self) -> JSON:
        return {"max_turns": self.max_turns, "max_tokens": self.max_tokens,
                "max_cost_usd": self.max_cost_usd, "timeout_seconds": self.timeout_seconds,
                "driver": self.driver}

    @classmethod
    def from_dict(cls, data: JSON) -> Limits:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


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


def new_task_id() -> str:
    """A short random id: 8 lowercase hex digits."""
    return os.urandom(4).hex()  # (as secrets.token_hex, without loading hmac and random)


@dataclass
class Task:
    """The persisted unit of work. Plain data; see the module docstring."""

    id: str
    goal: str
    workspace: str
    driver: str
    driver_config: JSON = field(default_factory=dict)
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
    output: OutputContract | None = None  # the schema its result must meet (--output-schema)
    result: Any = None  # the validated structured result
    schema_version: int = SCHEMA_VERSION

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

    def to_dict(self) -> JSON:
        return {
            "schema_version": SCHEMA_VERSION,  # written in the current format
            "id": self.id,
            "goal": self.goal,
            "workspace": self.workspace,
            "status": self.status.value,
            "driver": self.driver,
            "driver_config": self.driver_config,
            "driver_states": self.driver_states,
            "scope_state": self.scope_state,
            "turn": self.turn,
            "actions_run": self.actions_run,
            "seq": self.seq,
            "journal_offset": self.journal_offset,
            "epoch": self.epoch,
            "inflight": self.inflight,
            "usage": self.usage.to_dict(),
            "limits": self.limits.to_dict(),
            "pending": None if self.pending is None else self.pending.to_dict(),
            "summary": self.summary,
            "error": self.error,
            "workflow": self.workflow,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "elapsed": self.elapsed,
            **({} if self.output is None else {"output": self.output.to_dict(),
                                                "result": self.result}),
        }

    @classmethod
    def from_dict(cls, data: JSON) -> Task:
        pending = data.get("pending")
        return cls(
            schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
            id=data["id"],
            goal=data.get("goal", ""),
            workspace=data["workspace"],
            status=TaskStatus(data.get("status", "pending")),
            driver=data["driver"],
            driver_config=dict(data.get("driver_config", {})),
            driver_states={str(k): dict(v) for k, v in data.get("driver_states", {}).items()},
            scope_state=dict(data.get("scope_state", {})),
            turn=int(data.get("turn", 0)),
            actions_run=int(data.get("actions_run", 0)),
            seq=int(data.get("seq", 0)),
            journal_offset=int(data.get("journal_offset", 0)),
            epoch=int(data.get("epoch", 0)),
            inflight=data.get("inflight"),
            usage=Usage.from_dict(data.get("usage", {})),
            limits=Limits.from_dict(data.get("limits", {})),
            pending=None if pending is None else Wait.from_dict(pending),
            summary=data.get("summary", ""),
            error=data.get("error"),
            workflow=data.get("workflow"),
            created_at=float(data.get("created_at", 0.0)),
            updated_at=float(data.get("updated_at", 0.0)),
            elapsed=float(data.get("elapsed", 0.0)),
            output=OutputContract.from_dict(data["output"]) if data.get("output") else None,
            result=data.get("result"),
        )
