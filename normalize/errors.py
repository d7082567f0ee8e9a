"""The error tree and the process exit statuses.

    NormalizeError                 base of every error normalize raises on purpose
    ├── UsageError                 bad arguments or a bad request (exit 2)
    │   └── ConfigError            a workflow or config file is invalid (exit 2)
    │       └── LimitError         a workflow past one of its bounds (workflow.bounds)
    ├── TaskNotFoundError          no task matches an id or prefix (exit 2)
    ├── StoreError                 the task store cannot be read or written (exit 1)
    │   ├── CorruptTaskError       a task file cannot be parsed
    │   ├── SchemaVersionError     a task file comes from a newer normalize
    │   ├── TaskLockedError        another process owns the task (exit 1)
    │   └── StaleEpochError        this writer lost ownership of the task
    ├── CheckpointError            the shadow store failed: git missing or a git command
    │   │                          (checkpoints.shadow)
    │   └── MergeError             a child's change could not be written to the workspace
    │                              (checkpoints.landing)
    ├── WorkspaceError             a path leaves the workspace or touches a protected place
    ├── ProgramError               a program normalize starts outside the sandbox cannot be
    │                              found or started, or its time limit is not seconds (programs)
    ├── ToolError                  a tool cannot do what it was asked
    │   └── McpError               an MCP server or call failed (mcp.client)
    └── ProviderError              a model provider failed
        ├── MissingKeyError        no API key or server for the chosen provider (exit 2)
        │   └── ServerDownError    nothing listens at a local base URL (providers.openai_compat)
        ├── ProviderStatusError    an HTTP error status or an error event (providers.base)
        ├── IncompleteStreamError  the stream ended before its final event (providers.base)
        ├── TurnCancelledError     cancelled while streaming or waiting to retry (providers.base)
        ├── ReplayExhaustedError   more replies asked of a replay than recorded (providers.replay)
        └── ScriptExhaustedError   a scripted model called past its script; also an
                                   AssertionError (providers.scripted)

Every public subclass of `NormalizeError` in the package is drawn here, under
its first base (a test says so; a class whose name starts with `_` is its
module's own). Each error renders as one line (`str(err)`); the CLI prints it and exits with
`err.exit_status`.

Exit statuses (`ExitStatus`, the same table is in the README):

    0    done
    1    failed
    2    usage or configuration error
    3    a limit was reached; resumable
    4    waiting for an answer or an approval
    5    stuck: the model repeated itself without progress
    130  interrupted: Ctrl-C, SIGTERM, or stdout closed (`… --json | head -1`); resumable.
         A closed stdout is an interruption like Ctrl-C (not 141, "killed by SIGPIPE"): the
         run stops at a safe point and saves the task, so one status says "resume it".
         A batch is the exception: its reader may leave after the id it prints first,
         and the batch runs on to its end (its status is the batch's).
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """Process exit statuses; documented in the README."""

    DONE = 0
    FAILED = 1
    USAGE = 2
    LIMIT = 3
    WAITING = 4
    STUCK = 5
    INTERRUPTED = 130  # Ctrl-C, SIGTERM, or stdout closed under the run


class NormalizeError(Exception):
    """Base class of every error normalize raises on purpose."""

    exit_status: ExitStatus = ExitStatus.FAILED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(NormalizeError):
    """Bad arguments or a bad request."""

    exit_status = ExitStatus.USAGE


class ConfigError(UsageError):
    """A workflow or config file is invalid; the message is `FILE:LINE:COL: text`."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.col = col
        self.text = message
        self.others: list[ConfigError] = []  # more problems found in the same file
        if file is not None:
            where = file if line is None else f"{file}:{line}:{col or 1}"
            message = f"{where}: {message}"
        super().__init__(message, hint=hint)


class TaskNotFoundError(NormalizeError):
    """No task matches an id, prefix or alias."""

    exit_status = ExitStatus.USAGE


class StoreError(NormalizeError):
    """The task store cannot be read or written."""


class CorruptTaskError(StoreError):
    """A task file cannot be parsed."""


class SchemaVersionError(StoreError):
    """A task file was written by a newer normalize."""


class TaskLockedError(StoreError):
    """Another live process owns the task."""


class StaleEpochError(StoreError):
    """This writer lost ownership of the task to a newer one."""


class WorkspaceError(NormalizeError):
    """A path leaves the workspace or touches a protected place."""


class ToolError(NormalizeError):
    """A tool cannot do what it was asked; becomes an `error` result."""


class ProviderError(NormalizeError):
    """A model provider failed."""

    def __init__(self, message: str, *, retryable: bool = False, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retryable = retryable


class MissingKeyError(ProviderError):
    """No API key or server is configured for the chosen provider."""

    exit_status = ExitStatus.USAGE
