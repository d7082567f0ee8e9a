"""Setting up and running tasks: the one path the CLI and Python callers share.

`start_task` turns a workflow (or a driver name) into a new Task; `open_task`
loads one to resume; `run_task` builds the engine, the tools' context and the
driver, and drives the task to its next resting point; `run_flow` does both
for a workflow written in Python. Between runs, `hand_over` gives a task to
another driver and `switch_model` points it at another model (`resume
--driver`, `resume --model`); `apply_model` sets a workflow's model before
its first run (`--model`, `--base-url`); `follow_up` gives a finished task
its next instruction (`resume ID "…"`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cancel import CancelToken
from normalize.contract.driver import (
    DRIVERS,
    AgentLaunch,
    Driver,
    DriverServices,
    create_driver,
    driver_traits,
    model_refused,
)
from normalize.drivers.models import ScriptsKept, apply_model
from normalize.engine import Engine, Reply, RunOutcome
from normalize.errors import UsageError
from normalize.events import Subscriber
from normalize.homes import config_home, harness_root
from normalize.sandbox import SandboxMode, probe
from normalize.store import TaskStore
from normalize.structured import OutputContract
from normalize.subtasks.spawner import Spawner, sandboxed_judge
from normalize.tables import CacheSettings, LLMTable
from normalize.task import Limits, Task, TaskConfig
from normalize.tools.base import Approver, ToolContext, ToolRegistry
from normalize.tools.maps import repo_maps as lazy_repo_maps
from normalize.workflow.spec import WorkflowSpec

if TYPE_CHECKING:
    from normalize.mcp.client import McpSessions
    from normalize.memory.session import RunMemory
    from normalize.permissions import Flags, Grants
    from normalize.sandbox import SandboxPolicy
    from normalize.skills.catalog import Catalog
    from normalize.store.places import Places
    from normalize.telemetry import RunTracing


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
    network: bool | tuple[str, ...] | None = None  # --network
    env_allow: list[str] = field(default_factory=list)
    services: DriverServices = field(default_factory=DriverServices)
    approver: Approver | None = None
    asker: Callable[[str], str | None] | None = None
    store: TaskStore | None = None
    tools: ToolRegistry | None = None
    timeout: float = 600.0
    fsync: bool = True
    project_instructions: bool = True  # AGENTS.md / CLAUDE.md into the prompt (new tasks)
    output: OutputContract | None = None  # --output-schema: the result's schema (new tasks)
    tracing: RunTracing | None = None  # --otel: spans of every run (and the children's context)
    memory: bool = True  # --no-memory: this run neither recalls nor proposes memory

    def flags(self) -> Flags:
        """This run's permission flags, as the permissions' top layer takes them."""
        from normalize.permissions import Flags

        return Flags(approve=self.approve, allow=tuple(self.allow), deny=tuple(self.deny),
                     env_allow=tuple(self.env_allow), sandbox=self.sandbox,
                     network=self.network)

    def task_store(self) -> TaskStore:
        """The store this run's tasks live in (the default one, made on first use)."""
        return _store(self)


def _store(options: RunOptions) -> TaskStore:
    if options.store is None:
        from normalize.redact import Redactor

        # what is shown (journal, events, cache) is redacted; what resume executes is not
        redactor = Redactor.for_workspace(options.workspace)
        options.store = TaskStore(fsync=options.fsync, redact=redactor)
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


def load_spec(ref: str, workspace: Path, variables: Mapping[str, Any] | None = None, *,
              paths_trusted: bool = True) -> WorkflowSpec:
    """Find and validate a workflow by path or name, noting whether its permissions count.

    A name finds the workspace's `.normalize/workflows/` first, but an untrusted
    workspace file does not replace a built-in or user workflow of that name
    (see `normalize.workflow.catalog.locate_workflow`). A file named by path is
    the user's choice, unless `paths_trusted` is False (another agent named it,
    over MCP): then it counts as a workspace file, trusted only if `normalize
    trust` vouches for its content.
    """
    from normalize.permissions import file_digest, is_trusted
    from normalize.workflow.catalog import locate_workflow
    from normalize.workflow.conditions import is_condition
    from normalize.workflow.loader import load_workflow
    from normalize.workflow.steps import is_step_kind

    found = locate_workflow(ref, workspace, is_trusted)
    origin = found.origin
    if origin == "path" and not paths_trusted:
        origin = "trusted" if is_trusted(found.path) else "workspace"
    before = file_digest(found.path) if origin == "trusted" else None
    spec = load_workflow(found.path, overrides=variables, is_condition=is_condition,
                         is_step_kind=is_step_kind)
    if before is not None and file_digest(found.path) != before:
        origin = "workspace"  # changed while it was read: trust the older content only
    spec.origin = origin
    spec.shadowed = str(found.shadowed) if found.shadowed else ""
    return spec


def sandbox_policy(options: RunOptions, permissions: Mapping[str, Any], *,
                   hidden: tuple[str, ...] = ()) -> SandboxPolicy:
    """What programs may touch: the recorded `permissions` with the flags on top.

    `hidden` names paths no program may read (normalize's store and config).
    """
    from normalize.permissions import Permissions, command_line, validate

    checked = Permissions.from_dict(validate(permissions, "the task's permissions"))
    policy = command_line(checked, options.flags()).sandbox_policy()
    return replace(policy, hidden=hidden) if hidden else policy


def start_task(spec: WorkflowSpec, goal: str, options: RunOptions, *,
               limits: Limits | None = None, task_id: str | None = None,
               **fields: Any) -> Task:
    """A new task that runs `spec` in the workspace.

    `task_id` fixes its id (a batch item's, derived from its position); `fields`
    are more of the Task's (`parent`, `child`).
    """
    from normalize.permissions import load_user_hooks, mcp_servers, resolve_permissions
    from normalize.sandbox.refuse import refuse_state_in_workspace, refuse_unconfined

    limits = limits or replace(spec.limits)
    perms = resolve_permissions(spec, options.flags(), options.workspace)
    refuse_unconfined(perms.sandbox_policy(), perms.mode, options.interactive)  # before a task
    refuse_state_in_workspace(perms.sandbox_policy(), options.workspace, _store(options).home)
    load_user_hooks()  # a bad [[hooks]] table is refused before there is a task
    # a resumed run keeps these (the flags of that run may change them)
    servers, ignored = mcp_servers(spec, options.workspace)
    config = TaskConfig(spec=spec.to_dict(), permissions=perms.to_dict(),
                        mcp_servers=tuple(server.to_dict() for server in servers) or None,
                        permission_notes=(*perms.notes, *ignored),
                        project_instructions=options.project_instructions)
    task = Task.new(goal=goal or spec.description or spec.name,
                    workspace=str(options.workspace.resolve()), driver=spec.driver,
                    config=config, limits=limits, workflow=spec.path,
                    output=_output(spec, options), **fields)
    if task_id is not None:
        task.id = task_id
    _store(options).create(task)
    return task


def _output(spec: WorkflowSpec, options: RunOptions) -> OutputContract | None:
    """The result's schema: `--output-schema`, else the workflow's `output_schema`; with the
    workflow's `output_retries` (or `--output-retries`, put there) when it sets them."""
    contract = options.output
    if contract is None and spec.output_schema:
        from normalize.structured import load_contract

        if not driver_traits(spec.driver).checks_output:
            raise UsageError(f"{spec.path}: output_schema needs a workflow a model drives "
                             f"(this one's driver is {spec.driver})")
        contract = load_contract(Path(spec.output_schema), flag=f"{spec.path}: output_schema")
    if contract is not None and spec.output_retries is not None:
        contract = replace(contract, retries=spec.output_retries)
    return contract


def open_task(ref: str, options: RunOptions) -> Task:
    """The task `ref` names (id, unique prefix or `last`)."""
    store = _store(options)
    return store.load(store.resolve(ref), repair=True)


def tool_context(task: Task, options: RunOptions, *, places: Places | None = None,
                 grants: Grants | None = None,
                 recall: Callable[[str], str] | None = None) -> ToolContext:
    """The guard, caches, approval policy, sandbox and MCP servers a task's actions run under.

    `run_task` hands in the store's `places` and the `grants` it asked for
    once; without them they are asked for here. `recall` is the run's memory (a
    harness turn asks it, so the memory never rides the action's parameters).
    """
    from normalize.execution.cache import CacheSet, cache_from
    from normalize.tools.guard import WorkspaceGuard

    store, workspace = _store(options), Path(task.workspace)
    places = places or store.places(task.id, workspace)
    grants = grants or _grants(task, options, places)
    sessions = None
    if grants.servers:
        from normalize.mcp.client import McpSessions

        sessions = McpSessions(list(grants.servers), workspace=workspace, sandbox=grants.sandbox)
    table = CacheSettings.from_dict(task.config.spec_table.get("cache") or {})
    cache = cache_from(table, directory=places.cache, redact=store.redact)
    caches = CacheSet(cache, places.cache, redact=store.redact)
    guard = WorkspaceGuard(workspace, protected=list(places.private))
    return ToolContext(workspace=workspace, guard=guard, cache=cache, policy=grants.policy,
                       cancel=options.cancel, timeout=options.timeout,
                       approver=options.approver if options.interactive else None,
                       asker=options.asker if options.interactive else None, caches=caches,
                       sandbox=grants.sandbox, mcp=sessions,
                       children=spawner(task, options, grants),
                       state_dir=harness_state(store.home, task.id), recall=recall)


def _grants(task: Task, options: RunOptions, places: Places) -> Grants:
    from normalize.permissions import task_grants

    return task_grants(task, options.flags(), hidden=places.private,
                       home=_store(options).home, interactive=options.interactive)


def harness_state(home: Path, task_id: str) -> Path:
    """Where a harness driver keeps the task's sessions (under `homes.harness_root`)."""
    return harness_root(home) / task_id


def spawner(task: Task, options: RunOptions, grants: Grants) -> Spawner:
    """The service behind `spawn`: the task's children run as local processes."""
    from normalize.execution.local import LocalExecutor
    from normalize.subtasks.children import MAX_CONCURRENCY

    tracing = options.tracing
    flags = (*grants.argv, "--otel") if tracing is not None else grants.argv
    executor = LocalExecutor(int(os.environ.get("NORMALIZE_MAX_CONCURRENCY") or MAX_CONCURRENCY))
    store = _store(options)
    judge = sandboxed_judge(grants.sandbox, store, timeout=options.timeout,
                            cancel=options.cancel, label=task.id)
    return Spawner(task, store, executor, cancel=options.cancel,
                   set_model=apply_model, flags=flags, judge=judge,
                   child_env=tracing.child_env if tracing is not None else None)


def driver_services(task: Task, options: RunOptions, mcp: McpSessions | None = None,
                    repo_maps: Path | None = None,
                    sandbox: SandboxPolicy | None = None, memory: RunMemory | None = None,
                    skills: Catalog | None = None,
                    pre_approve: Callable[[str], list[str]] | None = None) -> DriverServices:
    """The caller's services, with what the run lends where the caller lent nothing.

    `replay:TASKID` looks the task up in the run's own store; the repo map is
    the tools' cached map of the task's workspace (kept in `repo_maps`, the
    store's by default); `mcp` (the run's MCP servers) lends its tools' commands.
    """
    services, store = options.services, _store(options)
    lent: dict[str, Any] = {}
    if services.resolve_journal is None:
        lent["resolve_journal"] = store.journal_of
    if services.config_dir is None:  # where the user-wide AGENTS.md lives
        lent["config_dir"] = config_home()
    if services.repo_map is None:
        lent["repo_map"] = lazy_repo_maps(Path(task.workspace),
                                          repo_maps or store.shared_cache_dir("repomap"),
                                          redact=store.redact)
    if services.extra_commands is None and mcp is not None:
        lent["extra_commands"] = mcp.reference  # the MCP tools, in a model's prompt
    if services.sandbox is None and sandbox is not None:
        lent["sandbox"] = sandbox  # the run's, for a program a driver starts (`acp`)
    lent.update(_deciders_loans(services, memory, skills))
    if services.pre_approve is None and pre_approve is not None:
        lent["pre_approve"] = pre_approve  # a loaded skill's `allowed-tools`, into the policy
    if services.launch is None:
        lent["launch"] = _agent_launch(harness_state(store.home, task.id))
    return replace(services, **lent)


def _deciders_loans(services: DriverServices, memory: RunMemory | None,
                    skills: Catalog | None) -> dict[str, Any]:
    """What a model's driver is lent where the caller lent nothing: memory, skills, models."""
    lent: dict[str, Any] = {}
    if services.recall is None and memory is not None and memory.recalls:
        lent["recall"] = memory.recall  # the guarded memory message, before each request
    if not services.remember and memory is not None:
        lent["remember"] = True  # what the model proposes is kept for the person to review
    if services.skills is None and skills is not None:
        lent["skills"] = skills
    if services.model_factory is None:
        lent["model_factory"] = ScriptsKept()  # each visit of an llm-decide plays on
    return lent


def _agent_launch(state_dir: Path) -> AgentLaunch:
    """`DriverServices.launch` for the task whose harness state is `state_dir`."""

    def launch(sandbox: SandboxPolicy, argv: list[str], base_url: str | None,
               model: str | None) -> tuple[dict[str, str], SandboxPolicy, list[str]]:
        from normalize.tools.harness.agents import acp_launch

        return acp_launch(sandbox, state_dir, argv, base_url, model)

    return launch


def tier_notice(task: Task, options: RunOptions) -> str:
    """The one line naming what the sandbox tier leaves weaker for this task's programs, or ''."""
    from normalize.permissions import task_permissions

    if task_permissions(task, options.flags()).sandbox_policy().mode is SandboxMode.OFF:
        return ""
    return probe().notice()


def make_driver(task: Task, options: RunOptions, mcp: McpSessions | None = None,
                repo_maps: Path | None = None, sandbox: SandboxPolicy | None = None,
                memory: RunMemory | None = None, skills: Catalog | None = None,
                pre_approve: Callable[[str], list[str]] | None = None) -> Driver:
    """The task's driver, built with everything it is lent (see `driver_services`)."""
    return create_driver(task.driver, task.config.to_driver_json(),
                         driver_services(task, options, mcp, repo_maps, sandbox, memory,
                                         skills, pre_approve))


def model_loans(task: Task, options: RunOptions, grants: Grants
                ) -> tuple[RunMemory | None, Catalog | None]:
    """What a model-driven task's run reads beyond the workspace: its memory and its skills.

    The user's `[memory]` and trusted files are read once; then `run_memory`
    and the skills a run here may use (`normalize.skills.catalog.discover`).
    """
    if not grants.remembers:  # a driver whose model reads memory and skills
        return None, None
    from normalize.permissions import load_user_memory, trust_check
    from normalize.skills.catalog import discover

    table = load_user_memory() if options.memory else {}
    trusted = trust_check()
    memory = run_memory(task, options, table) if options.memory else None
    skills = discover(Path(task.workspace), config_dir=options.services.config_dir or
                      config_home(), home=Path.home(), trusted=trusted)
    return memory, skills


def run_memory(task: Task, options: RunOptions, table: Mapping[str, Any]) -> RunMemory | None:
    """The memory a model-driven task's run reads and writes (None: none).

    The layers are `normalize.memory.settings`'s: the user's `[memory]` (`table`),
    the workflow's `memory_top_k` and `memory` (an untrusted workspace file
    never chooses `auto`), the flag; unattended runs (CI, `--approve never`)
    write nothing unless the workflow says so.
    """
    from normalize.memory.session import RunMemory
    from normalize.memory.settings import run_settings, user_settings

    user = user_settings(table, str(config_home() / "config.toml"))
    spec = task.config.spec_table
    mode = options.approve or str((task.config.permissions or {}).get("mode") or "")
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
    unattended = "in CI" if ci else "under --approve never" if mode == "never" else ""
    settings = run_settings(user, workflow_top_k=spec.get("memory_top_k"),
                            workflow_mode=spec.get("memory"),
                            trusted=spec.get("origin") != "workspace", enabled=True,
                            unattended=unattended)
    if not settings.used:
        return None
    from normalize.redact import Redactor

    store = _store(options)
    workspace = Path(task.workspace)
    redactor = store.redact or Redactor.for_workspace(workspace)  # entries are redacted, always
    return RunMemory.start(store.home, workspace, settings, store.events,
                           redact=lambda text: redactor(text))


def with_model(llm: LLMTable | None, model: str | None, base_url: str | None = None
               ) -> LLMTable:
    """A workflow's typed `llm` table with a `PROVIDER:MODEL` spec and a base URL put in."""
    table: dict[str, Any] = llm.to_dict() if llm is not None else {}
    apply_model(table, model, base_url)
    return LLMTable.from_config(table)


def switch_model(task: Task, model: str | None, base_url: str | None = None) -> None:
    """Point the task's model settings at `model` (a `PROVIDER:MODEL` spec) and at the model
    server `base_url` for its next run (either may be None: kept as it was)."""
    config = task.config
    change = {k: v for k, v in (("model", model), ("base_url", base_url)) if v is not None}
    if config.spec_table.get("llm"):
        spec = {**config.spec_table, "llm": {**config.spec_table["llm"], **change}}
        task.config = replace(config, spec=spec)
    else:
        task.config = replace(config, llm={**(config.llm or {}), **change})


def hand_over(task: Task, driver: str, *, model: str | None = None,
              base_url: str | None = None) -> str:
    """Give `task` to the driver registered as `driver` for its next run; the one it had.

    Each driver's state is kept under its name, so handing the task back later
    resumes the first driver where it stopped. `model` goes with `llm` or a harness.
    """
    if driver not in DRIVERS.names():
        raise UsageError(f"--driver {driver}: unknown driver "
                         f"(known: {', '.join(sorted(DRIVERS.names()))})")
    if model is not None or base_url is not None:
        traits = driver_traits(driver)
        table = traits.model_settings
        if traits.reads_llm_settings:
            switch_model(task, model, base_url)
        elif table:  # the driver's own model server (a harness's)
            own = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
            task.config = replace(task.config, extra={**task.config.extra, table: {
                **(task.config.extra.get(table) or {}), **own}})
        else:
            flag = "--model" if model is not None else "--base-url"
            raise UsageError(model_refused(flag, driver))
    previous, task.driver = task.driver, driver
    return previous


def follow_up(task: Task, instruction: str) -> None:
    """Give a finished (or stopped) task a new instruction for its next run.

    The task keeps its notes, plan, history and result cache; the model reads
    the instruction after the goal. `max_turns` allows the workflow's number
    of turns again, counted from here. Run it with `run_task(..., resumed=True)`.
    """
    from normalize.task import TaskStatus

    text = instruction.strip()
    if not text:
        raise UsageError("the follow-up instruction is empty: say what to do next")
    if not driver_traits(task.driver).follow_ups:  # a model's, or a harness's
        raise UsageError(f"task {task.id} is driven by {task.driver}: only tasks a model or a "
                         f"harness drives take a follow-up instruction")
    if task.status is TaskStatus.WAITING:
        raise UsageError(f"task {task.id} waits for an answer first: resume it with --answer")
    task.config = replace(task.config, follow_ups=(*task.config.follow_ups, text))
    task.summary = ""  # the last one answered the earlier instruction: never this run's
    allowance = Limits.from_dict(task.config.spec_table.get("limits") or {})
    if task.limits.max_turns is not None:
        task.limits.max_turns = task.turn + (allowance.max_turns or task.limits.max_turns)


def run_task(task: Task, options: RunOptions, *, driver: Driver | None = None,
             resumed: bool = False, reply: Reply | None = None) -> RunOutcome:
    """Drive `task` to its next resting point.

    The set-up goes down into each module once and is handed on as plain
    values (docs/architecture.md, "A task's walk through `run_task`"; pinned
    by tests/spine/test_walk.py): the store's places, the permissions (the
    sandbox, the MCP servers, the hooks), the tools' context, the driver, the
    workspace checkpoints, then the engine. Nothing below calls back into here.
    """
    from normalize.checkpoints import WorkspaceCheckpoints
    from normalize.skills.grants import pre_approver
    from normalize.tools import default_tools

    store = _store(options)
    if not os.path.isdir(task.workspace):
        raise UsageError(f"workspace {task.workspace} of task {task.id} no longer exists")
    workspace = Path(task.workspace)
    places = store.places(task.id, workspace)
    grants = _grants(task, options, places)
    memory, skills = model_loans(task, options, grants)
    tool_ctx = tool_context(task, options, places=places, grants=grants,
                            recall=memory.recall if memory is not None and memory.recalls
                            else None)
    pre_approve = pre_approver(skills, tool_ctx.policy.granted) if skills else None
    try:
        driver = driver or make_driver(task, options, tool_ctx.mcp, places.repo_maps,
                                       tool_ctx.sandbox, memory, skills, pre_approve)
        notes = [] if resumed else list(task.config.permission_notes)
        engine = Engine(store, options.tools or default_tools(), tool_ctx,
                        cancel=options.cancel, subscribers=_subscribers(options),
                        interactive=options.interactive,
                        workspace_checkpoints=WorkspaceCheckpoints.for_workspace(
                            workspace, store.home, store.task_path),
                        hooks=grants.hooks, notices=[
                            *notes, *grants.ignored, *(skills.notices if skills else ())],
                        consolidate=memory.consolidate if memory is not None and
                        memory.settings.mode != "off" else None)
        return engine.run(task, driver, resumed=resumed, reply=reply)
    finally:
        if tool_ctx.mcp is not None:
            tool_ctx.mcp.close()  # every server this run started stops with it


def _subscribers(options: RunOptions) -> list[Subscriber]:
    """The caller's subscribers, and the tracer's when `--otel` is on."""
    tracing = [options.tracing] if options.tracing is not None else []
    return [*options.subscribers, *tracing]


def run_flow(root: object, *, goal: str = "", options: RunOptions | None = None,
             overrides: Mapping[str, Any] | None = None, **compile_options: Any) -> RunOutcome:
    """Compile a Python flow and run it as a task: the same engine, events and store as TOML."""
    from normalize.workflow.flow import compile_flow

    options = options or RunOptions()
    spec = compile_flow(root, base_dir=options.workspace, overrides=overrides,
                        **compile_options)
    return run_task(start_task(spec, goal, options), options)
