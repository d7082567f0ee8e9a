"""normalize: automate work on a codebase through pluggable drivers.

The public API. Names load on first use, so `import normalize` stays cheap
(the command line imports this package before anything else).

    from normalize import RunOptions, load_spec, start_task, run_task
    spec = load_spec("health", workspace)
    outcome = run_task(start_task(spec, "check the repo", RunOptions(workspace=workspace)),
                       RunOptions(workspace=workspace))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the persisted data
    "Task": "normalize.task",
    "TaskConfig": "normalize.task",
    "Action": "normalize.task",
    "Decision": "normalize.task",
    "ActionResult": "normalize.task",
    "TaskStatus": "normalize.task",
    "ResultStatus": "normalize.task",
    "Wait": "normalize.task",
    "Usage": "normalize.task",
    "Limits": "normalize.task",
    # events
    "EVENT_VERSION": "normalize.events",
    "Emitter": "normalize.events",
    "event_from_dict": "normalize.events",
    "Notice": "normalize.events",
    # the engine and drivers
    "Engine": "normalize.engine",
    "RunOutcome": "normalize.engine",
    "Reply": "normalize.engine",
    "Driver": "normalize.contract.driver",
    "DriverConfig": "normalize.contract.driver",
    "DriverFactory": "normalize.contract.driver",
    "DriverServices": "normalize.contract.driver",
    "RunContext": "normalize.contract.driver",
    "create_driver": "normalize.contract.driver",
    # running tasks
    "RunOptions": "normalize.runner",
    "load_spec": "normalize.runner",
    "start_task": "normalize.runner",
    "open_task": "normalize.runner",
    "run_task": "normalize.runner",
    "run_flow": "normalize.runner",
    "TaskStore": "normalize.store",
    # tools and the command language
    "Tool": "normalize.tools.base",
    "ToolContext": "normalize.tools.base",
    "ToolRegistry": "normalize.tools.base",
    "default_tools": "normalize.tools",
    "parse": "normalize.intents",
    "parse_command": "normalize.intents",
    # workflows in Python
    "Step": "normalize.workflow.flow",
    "Sequence": "normalize.workflow.flow",
    "Loop": "normalize.workflow.flow",
    "Branch": "normalize.workflow.flow",
    "Scope": "normalize.workflow.flow",
    "to_toml": "normalize.workflow.flow",
    # errors
    "ExitStatus": "normalize.errors",
    "NormalizeError": "normalize.errors",
    "UsageError": "normalize.errors",
    "ConfigError": "normalize.errors",
    "ProviderError": "normalize.errors",
}

__all__ = [
    "EVENT_VERSION",
    "Action",
    "ActionResult",
    "Branch",
    "ConfigError",
    "Decision",
    "Driver",
    "DriverConfig",
    "DriverFactory",
    "DriverServices",
    "Emitter",
    "Engine",
    "ExitStatus",
    "Limits",
    "Loop",
    "NormalizeError",
    "Notice",
    "ProviderError",
    "Reply",
    "ResultStatus",
    "RunContext",
    "RunOptions",
    "RunOutcome",
    "Scope",
    "Sequence",
    "Step",
    "Task",
    "TaskConfig",
    "TaskStatus",
    "TaskStore",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "Usage",
    "UsageError",
    "Wait",
    "create_driver",
    "default_tools",
    "event_from_dict",
    "load_spec",
    "open_task",
    "parse",
    "parse_command",
    "run_flow",
    "run_task",
    "start_task",
    "to_toml",
]

if TYPE_CHECKING:
    from normalize.contract.driver import (
        Driver,
        DriverConfig,
        DriverFactory,
        DriverServices,
        RunContext,
        create_driver,
    )
    from normalize.engine import Engine, Reply, RunOutcome
    from normalize.errors import (
        ConfigError,
        ExitStatus,
        NormalizeError,
        ProviderError,
        UsageError,
    )
    from normalize.events import EVENT_VERSION, Emitter, Notice, event_from_dict
    from normalize.intents import parse, parse_command
    from normalize.runner import RunOptions, load_spec, open_task, run_flow, run_task, start_task
    from normalize.store import TaskStore
    from normalize.task import (
        Action,
        ActionResult,
        Decision,
        Limits,
        ResultStatus,
        Task,
        TaskConfig,
        TaskStatus,
        Usage,
        Wait,
    )
    from normalize.tools import default_tools
    from normalize.tools.base import Tool, ToolContext, ToolRegistry
    from normalize.workflow.flow import Branch, Loop, Scope, Sequence, Step, to_toml


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'normalize' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
