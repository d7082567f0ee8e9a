"""The executor seam: where sub-tasks run (`submit / watch / collect / cancel`).

An executor runs a child task to its next resting point, somewhere: the one
here (`execution/local.py`) as a `normalize` process on this machine; a
cluster one would do it elsewhere. Nothing in the interface is local: a job
names a task and the store it lives in (a path today, a URL for a remote
store), a handle is an opaque reference, and the outcome of a job is read
back from the store by the caller, not from the executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ChildJob:
    """One run of a child task: which task, in which store, with which flags."""

    task_id: str
    store: str  # the data home the task lives in (a path, or a URL for a remote store)
    flags: tuple[str, ...] = ()  # the parent run's flags the child runs under (`--sandbox …`)
    log: str = ""  # where the run's own output goes (empty: nowhere)
    env: dict[str, str] = field(default_factory=dict)  # more environment (`TRACEPARENT`)


@dataclass(frozen=True)
class Handle:
    """A submitted job: the task it runs and the executor's own reference to it."""

    task_id: str
    ref: str


class JobState(StrEnum):
    """Where a submitted job stands."""

    RUNNING = "running"
    EXITED = "exited"


class Executor(Protocol):
    """Runs child tasks; the caller reads their outcome from the store."""

    def submit(self, job: ChildJob) -> Handle:
        """Start `job` (waiting for a free place when the executor is at its limit)."""
        ...

    def watch(self, handle: Handle) -> JobState:
        """Whether the job still runs."""
        ...

    def collect(self, handle: Handle, timeout: float | None = None) -> int | None:
        """Wait up to `timeout` for the job to end; its exit status, or None if it still runs."""
        ...

    def cancel(self, handle: Handle) -> None:
        """Stop the job (it ends as an interrupted task, resumable) and wait for it."""
        ...


@runtime_checkable
class Placing(Protocol):
    """An executor that says where each job ran (a cluster's node)."""

    nodes: dict[str, str]  # task id -> the node its last ended job ran on
    lost: dict[str, str]  # task id -> why the executor gave its last job up (a dead worker)
    retried: dict[str, int]  # task id -> how often it ran its last job again by itself


@runtime_checkable
class Connecting(Protocol):
    """An executor that reaches something before its first job (a cluster)."""

    def connect(self) -> None:
        """Reach it, or raise a `ConfigError` that names why not (one line)."""
        ...
