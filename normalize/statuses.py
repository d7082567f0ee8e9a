"""Where a task stands (`TaskStatus`) and its file's format version, without the task model.

`normalize tasks` lists from the index alone: it needs these names, not `Task`
(and the serialiser and settings it is built from). `normalize.task` re-exports both.
"""

from __future__ import annotations

from enum import StrEnum

from normalize.errors import ExitStatus

SCHEMA_VERSION = 3
"""Version of the task file format; bumped with a migration in `store.migrations`.

2: `driver_states` keeps each driver's state by driver name (1 had one `driver_state`),
   so a task handed to another driver and back resumes where each left off.
3: `driver_config` holds a `TaskConfig`: its declared keys, each left out at its
   default, and any other key under `extra`.
"""


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


__all__ = ["SCHEMA_VERSION", "TaskStatus"]
