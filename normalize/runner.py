"""Setting up and running tasks: the one path the CLI and Python callers share.

`start_task` turns a workflow (or a driver name) into a new Task; `open_task`
loads one to resume; `run_task` builds the engine, the tools' context and the
driver, and drives the task to its next resting point.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cancel import CancelToken
from normalize.drivers.base import Driver, DriverServices, create_driver
from normalize.engine import Engine, Reply, RunOutcome
from normalize.errors import UsageError
from normalize.events import Subscriber
from normalize.store import TaskStore
from normalize.task import Limits, Task
from normalize.tools.base import Approver, ToolContext, ToolRegistry
from normalize.workflow.spec import WorkflowSpec

if TYPE_CHECKING:
    from normalize.checkpoints import WorkspaceCheckpoints


@dataclass
class RunOptions:
    """What a caller decides about a run (the CLI fills it from flags)."""

    workspace: Path = field(default_factory=Path.cwd)
    subscribers: Iterable[Subscriber] = ()
    cancel: CancelToken = field(default_factory=CancelToken)
    interactive: bool = False
    approve: str | None = None
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    sandbox: str | None = None  # --sandbox workspace|read-only|off
    network: bool | None = None  # --network
    env_allow: list[str] = field(default_factory=list)
    services: DriverServices = field(default_factory=DriverServices)
    approver: Approver | None = None
    asker: Callable[[str], str | None] | None = None
    store: TaskStore | None = None
    tools: ToolRegistry | None = None
    timeout: float = 600.0
    fsync: bool = True


def _store(options: RunOptions) -> TaskStore:
    if options.store is None:
        from normalize.redact import Redactor

        redactor = Redactor.for_workspace(options.workspace)
        options.store = TaskStore(fsync=options.fsync, redact=redactor.redact_obj)
    return options.store


def parse_vars(pairs: Iterable[str]) -> dict[str, str]:
    """`--var key=value` pairs; a pair without `=` is a UsageError naming it."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--var {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def load_spec(ref: str, workspace: Path,
              variables: Mapping[str, Any] | None = None) -> WorkflowSpec:
    """Find and validate a workflow by path or name."""
    from normalize.steps import is_step_kind
    from normalize.workflow.catalog import find_workflow
    from normalize.workflow.conditions import is_condition
    from normalize.workflow.loader import load_workflow

    path = find_workflow(ref, workspace)
    return load_workflow(path, overrides=variables, is_condition=is_condition,
                         is_step_kind=is_step_kind)


def start_task(spec: WorkflowSpec, goal: str, options: RunOptions, *,
               limits: Limits | None = None) -> Task:
    """A new task that runs `spec` in the workspace."""
    limits = limits or Limits.from_dict(spec.limits)
    config: dict[str, Any] = {"spec": spec.to_dict()}
    if options.approve:
        config["approve"] = options.approve  # a resumed run keeps the approval mode
    task = Task.new(goal=goal or spec.description or spec.name,
                    workspace=str(options.workspace.resolve()), driver=spec.driver,
                    driver_config=config, limits=limits, workflow=spec.path)
    return task


def open_task(ref: str, options: RunOptions) -> Task:
    """The task `ref` names (id, unique prefix or `last`)."""
    store = _store(options)
    return store.load(store.resolve(ref))


def tool_context(task: Task, options: RunOptions) -> ToolContext:
    """The guard, cache and policy a task's actions run under."""
    from normalize.execution.cache import CacheSet, make_cache
    from normalize.tools.approval import ApprovalPolicy
    from normalize.tools.guard import WorkspaceGuard

    store = _store(options)
    workspace = Path(task.workspace)
    spec = task.driver_config.get("spec", {})
    cache_conf = dict(spec.get("cache") or {})
    strategy = cache_conf.pop("strategy", "persistent")
    cache = make_cache(strategy, directory=store.cache_dir(task.id), **cache_conf)
    caches = CacheSet(cache, store.cache_dir(task.id))
    permissions = dict(spec.get("permissions") or {})
    approve = options.approve or task.driver_config.get("approve")
    if approve:
        permissions["mode"] = approve
    permissions.setdefault("mode", "auto")
    permissions["allow"] = [*permissions.get("allow", []), *options.allow]
    permissions["deny"] = [*permissions.get("deny", []), *options.deny]
    policy = ApprovalPolicy.from_config(permissions, interactive=options.interactive)
    guard = WorkspaceGuard(workspace, protected=[store.home])
    return ToolContext(workspace=workspace, guard=guard, cache=cache, policy=policy,
                       cancel=options.cancel, timeout=options.timeout,
                       approver=options.approver if options.interactive else None,
                       asker=options.asker if options.interactive else None, caches=caches)


def make_driver(task: Task, options: RunOptions) -> Driver:
    return create_driver(task.driver, task.driver_config, options.services)


def workspace_checkpoints(task: Task, store: TaskStore) -> WorkspaceCheckpoints | None:
    """The recorder of the task's workspace checkpoints (None when turned off)."""
    from normalize.checkpoints import WorkspaceCheckpoints

    return WorkspaceCheckpoints.for_workspace(Path(task.workspace), store.home, store.task_path)


def run_task(task: Task, options: RunOptions, *, driver: Driver | None = None,
             resumed: bool = False, reply: Reply | None = None) -> RunOutcome:
    """Drive `task` to its next resting point."""
    from normalize.tools import default_tools

    store = _store(options)
    if not os.path.isdir(task.workspace):
        raise UsageError(f"workspace {task.workspace} of task {task.id} no longer exists")
    tools = options.tools or default_tools()
    driver = driver or make_driver(task, options)
    engine = Engine(store, tools, tool_context(task, options), cancel=options.cancel,
                    subscribers=options.subscribers, interactive=options.interactive)
    engine.workspace_checkpoints = workspace_checkpoints(task, store)
    return engine.run(task, driver, resumed=resumed, reply=reply)
