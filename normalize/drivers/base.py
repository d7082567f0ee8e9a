"""The Driver protocol, the context a driver decides in, and the driver registry.

A driver decides; the engine does. `decide` returns the next Decision (or
None when there is nothing left to do), `on_result` hears how each action
ended, and `snapshot` / `restore` carry the driver's state across processes.
Built-in drivers and third-party ones (entry-point group `normalize.drivers`)
are registered the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from normalize.cancel import CancelToken
from normalize.errors import UsageError
from normalize.events import Emit
from normalize.plugins import PluginGroup
from normalize.task import Action, ActionResult, Decision, Task

if TYPE_CHECKING:
    from normalize.tools.base import ToolRegistry

LineReader = Callable[[str], str | None]
"""Reads one command from a person given a prompt; None means end of input."""


@dataclass
class DriverServices:
    """What the outside world lends a driver when it is created."""

    read_line: LineReader | None = None
    model_factory: Callable[..., Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    resolve_journal: Callable[[str], Path] | None = None
    """The journal of the task a reference names, in the run's own store (`replay:TASKID`)."""


@dataclass
class RunContext:
    """What a driver may consult while deciding."""

    task: Task
    workspace: Path
    emit: Emit
    cancel: CancelToken
    tools: ToolRegistry
    interactive: bool = False


@runtime_checkable
class Driver(Protocol):
    """Decides what a task does next."""

    name: ClassVar[str]

    def decide(self, task: Task, ctx: RunContext) -> Decision | None: ...

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


class DriverFactory(Protocol):
    """A driver class: built from its JSON config and the lent services."""

    name: ClassVar[str]

    def from_config(self, config: dict[str, Any], services: DriverServices) -> Driver: ...


def _builtin_drivers() -> dict[str, str]:
    return {
        "workflow": "normalize.drivers.workflow:WorkflowDriver",
        "state_machine": "normalize.drivers.state_machine:StateMachineDriver",
        "user": "normalize.drivers.user:UserDriver",
        "llm": "normalize.drivers.llm:LLMDriver",
    }


DRIVERS: PluginGroup[Any] = PluginGroup("normalize.drivers", _builtin_drivers)


def create_driver(name: str, config: dict[str, Any], services: DriverServices) -> Driver:
    """Instantiate the driver registered as `name` from its config."""
    try:
        cls = DRIVERS.get(name)
    except KeyError:
        known = ", ".join(DRIVERS.names())
        raise UsageError(f"unknown driver {name!r} (known: {known})") from None
    driver: Driver = cls.from_config(config, services)
    return driver
