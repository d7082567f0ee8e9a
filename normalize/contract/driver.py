"""The driver contract: the Driver protocol, what a driver is lent, and the registry.

A driver decides; the engine does. `from_config` builds a driver from the
task's JSON config, `decide` returns the next Decision (or None when there is
nothing left to do), `on_result` hears how each action ended, and `snapshot`
/ `restore` carry the driver's state across processes. Built-in drivers and
third-party ones (entry-point group `normalize.drivers`) are registered the
same way. docs/plugins.md is the guide for writing one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, runtime_checkable

from normalize.cancel import CancelToken
from normalize.contract.builtin import BUILTIN_DRIVERS
from normalize.errors import UsageError
from normalize.events import Emit
from normalize.plugins import PluginGroup
from normalize.retry import RetryPolicy
from normalize.skills.catalog import Catalog
from normalize.task import Action, ActionResult, Decision, Task

if TYPE_CHECKING:
    from normalize.sandbox import SandboxPolicy

LineReader = Callable[[str], str | None]
"""Reads one command from a person given a prompt; None means end of input."""

DriverConfig = dict[str, Any]
"""A task's configuration as plain JSON (`TaskConfig.to_driver_json()`), kept across resumes.

A task started from a workflow file has `{"spec": WORKFLOW}` where WORKFLOW is
the validated file as a dict (`name`, `description`, `vars` with `--var`
overrides applied, `limits`, `steps`, `states`, `llm`, ...), plus `"approve"`
when the run was started with `--approve MODE`. Read keys with `.get`: a
driver taking a task over from another gets that task's config as it is.
"""


class LineQueue:
    """Lines a person typed while the model worked; each reaches the model at its next turn."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def put(self, line: str) -> None:
        if line.strip():
            with self._lock:
                self._lines.append(line.strip())

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    def drain(self) -> list[str]:
        """The lines queued so far, oldest first; the queue is empty afterwards."""
        with self._lock:
            lines, self._lines = self._lines, []
        return lines


AgentLaunch = Callable[["SandboxPolicy", list[str], str | None, str | None],
                       tuple[dict[str, str], "SandboxPolicy", list[str]]]
"""`launch(sandbox, argv, base_url, model)`: see `DriverServices.launch`."""


@dataclass
class DriverServices:
    """What the outside world lends a driver when it is created (each one may be absent)."""

    read_line: LineReader | None = None
    """A person's next command (the `user` driver), or None at the end of input."""
    model_factory: Callable[..., Any] | None = None
    """Builds a model client from a `PROVIDER:MODEL` spec (tests and users' CI script one)."""
    resolve_journal: Callable[[str], Path] | None = None
    """The journal of the task a reference names, in the run's own store (`replay:TASKID`)."""
    inbox: LineQueue | None = None
    """Lines typed at the terminal while the model works, for its next turn."""
    config_dir: Path | None = None
    """The user's config directory (where the user-wide AGENTS.md lives)."""
    model_retry: RetryPolicy | None = None
    """How provider calls are retried (None: the driver's own default)."""
    extra_commands: Callable[[], str] | None = None
    """More commands for a model's prompt than the built-in verbs (the run's MCP tools)."""
    repo_map: Callable[[int], Callable[[], str]] | None = None
    """The workspace's repo map within N tokens: a callable giving its text, asked each turn
    (the tools' cached map: it changes only when the source files do)."""
    sandbox: SandboxPolicy | None = None
    """What the task's programs may touch: a driver that starts a program of its own (the
    `acp` driver's agent) starts it under this (None: the default policy)."""
    skills: Catalog | None = None
    """The Agent Skills the run may use (a catalog for the prompt, bodies on activation)."""
    pre_approve: Callable[[str], list[str]] | None = None
    """Called as a skill loads: its `allowed-tools` join the run's approval policy
    (`normalize.skills.grants`); the lines to say. None: no skill found grants anything."""
    remember: bool = False
    """Whether the run keeps what the model proposes with `remember` (its memory is on); the
    verb is offered only then."""
    recall: Callable[[str], str] | None = None
    """Memory for a run's input: the one guarded message of the entries relevant to it ('' when
    none), asked before each model request and never kept (None: no memory this run)."""
    launch: AgentLaunch | None = None
    """What an agent a driver starts (`acp`) needs to reach its model, as a harness turn gets
    it: `launch(sandbox, argv, base_url, model)` gives the variables to set, the sandbox with
    its home, keys and model host added, and the paths it must read (None: nothing added)."""


@dataclass
class RunContext:
    """What a driver may consult while deciding (it never executes tools itself)."""

    task: Task
    workspace: Path
    emit: Emit
    cancel: CancelToken
    interactive: bool = False
    request_context: Callable[[dict[str, Any]], str | None] | None = None
    """The person's `before_request` hooks: context for one model request (None: no hooks)."""
    compact_veto: Callable[[dict[str, Any]], str | None] | None = None
    """The person's `before_compact` hooks: a reason not to compact the context (None: none)."""


@runtime_checkable
class Driver(Protocol):
    """Decides what a task does next: the whole contract a driver plugin implements.

    The engine calls, in order: `from_config` once per process; `restore` on a
    resumed task this driver ran before (not when it takes a task over from
    another driver); then repeatedly `decide`, and `on_result` once per action
    of each decision, in the order written; `snapshot` at every checkpoint.
    Raise a `NormalizeError` (e.g. `ConfigError`) to fail the task with a
    one-line message; any other exception fails it as an internal error.
    """

    name: ClassVar[str]

    @classmethod
    def from_config(cls, config: DriverConfig, services: DriverServices) -> Self:
        """A driver for a task whose configuration, as plain JSON, is `config`."""
        ...

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        """The next decision; None or `Decision.finish(...)` ends the run."""
        ...

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        """How one action of the last decision ended."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The driver's state as JSON, enough for `restore` to continue in a new process."""
        ...

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `snapshot` taken by an earlier process."""
        ...


# -- what a driver may declare beyond the protocol (docs/plugins.md, "Capabilities") --------
# Each is optional; a driver without it gets the documented default. The engine checks them
# with `isinstance`, never by probing for a name.


@runtime_checkable
class Adopts(Protocol):
    """A driver that reads what happened before it took a task over from another driver."""

    def adopt(self, history: list[dict[str, Any]]) -> None:
        """Called once, before the first `decide`, with the task's last finished actions
        (`command`, `tool`, `status`, `output`, `error`), oldest first."""
        ...


@runtime_checkable
class Redecides(Protocol):
    """A driver that says whether it decides again after a troubled stop (default: no).

    True: when a resume finds an outcome unknown (or a failure in an in-order
    decision), the rest of the in-flight decision is not run; each action of it
    gets a `cancelled` result and the driver is asked for a new decision (a
    model must see what happened first). False: the rest runs as it would have.
    """

    @property
    def redecides_on_resume(self) -> bool: ...


@runtime_checkable
class BoundByLimits(Protocol):
    """A driver that says whether the task's limits bind it (default: they do).

    False (a person at the prompt): `max_turns`, `max_tokens`, the budget and the
    timeout are not checked before its decisions, unless the limits were set
    for this very driver (`Limits.driver`).
    """

    @property
    def bound_by_limits(self) -> bool: ...


@runtime_checkable
class TakesModel(Protocol):
    """A driver a model drives: `--model` and `--base-url` go with it (default: they do not).

    `model_settings` names where they go in the task's configuration: `"llm"`, the
    workflow's model settings (`[workflow.llm]`, what `llm` reads: the driver runs
    "a workflow a model drives"), or the driver's own table (a harness's `harness`:
    its own model server, leaving the task's model settings to the next driver).
    """

    model_settings: ClassVar[str]


@runtime_checkable
class TakesFollowUps(Protocol):
    """A driver that reads `follow_ups` from its config (default: no).

    True: `resume ID "next instruction"` continues its finished task, and a
    terminal offers a follow-up prompt when its run ends.
    """

    takes_follow_ups: ClassVar[bool]


@runtime_checkable
class ReadsTypedLines(Protocol):
    """A driver that reads the `inbox` service at each turn (default: no).

    True: lines a person types at the terminal while it works are queued for it.
    """

    reads_typed_lines: ClassVar[bool]


@runtime_checkable
class ChecksOutput(Protocol):
    """A driver that holds its result to the task's output contract (`task.output`;
    `--output-schema`, a workflow's `output_schema`) (default: no, and both are refused)."""

    checks_output: ClassVar[bool]


@runtime_checkable
class ShowsResults(Protocol):
    """A driver a person drives, who reads every result (default: no).

    True: the live view shows each action's output under it, and a hand-over to
    it shows the task's last steps first.
    """

    shows_results: ClassVar[bool]


@runtime_checkable
class Remembers(Protocol):
    """A driver whose model requests carry the run's memory and Agent Skills (default: no)."""

    remembers: ClassVar[bool]


@dataclass(frozen=True)
class DriverTraits:
    """What a registered driver class declares beyond the protocol, read once per class."""

    model_settings: str = ""
    """Where `--model` goes (`TakesModel`); empty: the driver takes no model."""
    follow_ups: bool = False
    typed_lines: bool = False
    checks_output: bool = False
    shows_results: bool = False
    remembers: bool = False

    @classmethod
    def of(cls, driver: object) -> DriverTraits:
        """The traits `driver` (a class) declares as class attributes."""
        return cls(
            model_settings=driver.model_settings if isinstance(driver, TakesModel) else "",
            follow_ups=isinstance(driver, TakesFollowUps) and bool(driver.takes_follow_ups),
            typed_lines=isinstance(driver, ReadsTypedLines) and bool(driver.reads_typed_lines),
            checks_output=isinstance(driver, ChecksOutput) and bool(driver.checks_output),
            shows_results=isinstance(driver, ShowsResults) and bool(driver.shows_results),
            remembers=isinstance(driver, Remembers) and bool(driver.remembers))

    @property
    def reads_llm_settings(self) -> bool:
        """Whether a model drives it through the workflow's `[workflow.llm]` settings."""
        return self.model_settings == "llm"


_TRAITS: dict[object, DriverTraits] = {}


def driver_traits(name: str) -> DriverTraits:
    """The traits of the driver registered as `name` (none when it is unknown or broken)."""
    try:
        cls = DRIVERS.get(name)
    except KeyError:
        return DriverTraits()
    if cls not in _TRAITS:  # read once, when the class is first registered or loaded
        _TRAITS[cls] = DriverTraits.of(cls)
    return _TRAITS[cls]


def model_refused(flag: str, driver: str) -> str:
    """Why `flag` (`--model`, `--base-url`) cannot go with `--driver DRIVER`: the drivers it can."""
    loaded = DRIVERS.load_all()
    names = dict.fromkeys(name for name in (*BUILTIN_DRIVERS, *sorted(loaded))
                          if name in loaded and driver_traits(name).model_settings)
    return (f"{flag} goes with --driver {', '.join(names)} (a driver a model drives), "
            f"not --driver {driver}")


def redecides(driver: Driver) -> bool:
    """Whether `driver` decides again after a troubled stop rather than run its decision's rest."""
    return bool(getattr(driver, "redecides_on_resume", False))  # `Redecides`, minus isinstance


def bound_by_limits(driver: Driver) -> bool:
    """Whether a task's limits bind `driver` (every driver's but one that says otherwise)."""
    return bool(getattr(driver, "bound_by_limits", True))  # `BoundByLimits`


DriverFactory = Callable[[DriverConfig, DriverServices], Driver]
"""The factory signature: a driver class's bound `from_config`."""


def _builtin_drivers() -> dict[str, str]:
    return dict(BUILTIN_DRIVERS)


DRIVERS: PluginGroup[type[Driver]] = PluginGroup("normalize.drivers", _builtin_drivers)


def create_driver(name: str, config: DriverConfig, services: DriverServices) -> Driver:
    """Instantiate the driver registered as `name` from its config."""
    try:
        cls = DRIVERS.get(name)
    except KeyError:
        raise UsageError(DRIVERS.unknown(name, "driver")) from None
    factory: DriverFactory | None = getattr(cls, "from_config", None)
    if not callable(factory):
        target = DRIVERS.infos()[DRIVERS.names().index(name)].target
        raise UsageError(f"driver {name!r} ({target}) has no from_config(config, services); "
                         f"see docs/plugins.md")
    return factory(config, services)
