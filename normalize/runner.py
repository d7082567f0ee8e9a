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
from normalize.contract.driver import DRIVERS, Driver, DriverServices, create_driver
from normalize.engine import Engine, Reply, RunOutcome
from normalize.errors import ToolError, UsageError
from normalize.events import Subscriber
from normalize.homes import config_home
from normalize.sandbox import SandboxMode, SandboxPolicy, SandboxTier, probe
from normalize.spawner import Spawner, private_places
from normalize.store import TaskStore
from normalize.structured import OutputContract
from normalize.tables import CacheSettings, LLMTable, given
from normalize.task import Limits, Task, TaskConfig
from normalize.tools.base import Approver, ToolContext, ToolRegistry
from normalize.workflow.spec import WorkflowSpec

if TYPE_CHECKING:
    from normalize.checkpoints import WorkspaceCheckpoints
    from normalize.hooks import HookRunner
    from normalize.mcp.config import ServerSpec
    from normalize.permissions import Permissions
    from normalize.sandbox import SandboxPolicy
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
    from normalize.steps import is_step_kind
    from normalize.workflow.catalog import locate_workflow
    from normalize.workflow.conditions import is_condition
    from normalize.workflow.loader import load_workflow

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


def _shown(path: str, workspace: Path) -> str:
    try:
        return Path(path).resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return path


def resolve_permissions(spec: WorkflowSpec, options: RunOptions) -> Permissions:
    """Defaults < the user's config < the workflow (only narrowing, if untrusted) < flags."""
    from normalize.permissions import UNTRUSTED_HINT, load_user_config

    perms = load_user_config()
    where = _shown(spec.path, options.workspace)
    if spec.shadowed:
        shadowed = _shown(spec.shadowed, options.workspace)
        perms = replace(perms, notes=(f"ignored {shadowed}: {UNTRUSTED_HINT}; running the "
                                      f"{spec.origin} workflow {spec.name!r} ({where}) instead",))
    perms = perms.overlay(given(spec.permissions), where, trusted=spec.origin != "workspace")
    return command_line(perms, options)


def command_line(perms: Permissions, options: RunOptions) -> Permissions:
    """`perms` with the flags on top (they may widen: the user typed them)."""
    table: dict[str, Any] = {"allow": options.allow, "deny": options.deny,
                             "env_allow": options.env_allow}
    if options.approve:
        table["mode"] = options.approve
    if options.sandbox is not None:
        table["sandbox"] = options.sandbox
    if options.network is not None:
        table["network"] = options.network
    return perms.overlay(table, "the command line")


def sandbox_policy(options: RunOptions, permissions: Mapping[str, Any], *,
                   hidden: tuple[str, ...] = ()) -> SandboxPolicy:
    """What programs may touch: the recorded `permissions` with the flags on top.

    `hidden` names paths no program may read (normalize's store and config).
    """
    from normalize.permissions import Permissions, validate

    checked = Permissions.from_dict(validate(permissions, "the task's permissions"))
    policy = command_line(checked, options).sandbox_policy()
    return replace(policy, hidden=hidden) if hidden else policy


def start_task(spec: WorkflowSpec, goal: str, options: RunOptions, *,
               limits: Limits | None = None, task_id: str | None = None,
               **fields: Any) -> Task:
    """A new task that runs `spec` in the workspace.

    `task_id` fixes its id (a batch item's, derived from its position); `fields`
    are more of the Task's (`parent`, `child`).
    """
    limits = limits or replace(spec.limits)
    perms = resolve_permissions(spec, options)
    refuse_unconfined(perms.sandbox_policy(), perms.mode, options.interactive)  # before a task
    refuse_state_in_workspace(perms.sandbox_policy(), options.workspace, _store(options).home)
    from normalize.permissions import load_user_hooks

    load_user_hooks()  # a bad [[hooks]] table is refused before there is a task
    # a resumed run keeps these (the flags of that run may change them)
    servers, ignored = mcp_servers(spec, options)
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

        if spec.driver != "llm":
            raise UsageError(f"{spec.path}: output_schema needs a workflow a model drives "
                             f"(this one's driver is {spec.driver})")
        contract = load_contract(Path(spec.output_schema), flag=f"{spec.path}: output_schema")
    if contract is not None and spec.output_retries is not None:
        contract = replace(contract, retries=spec.output_retries)
    return contract


def mcp_servers(spec: WorkflowSpec, options: RunOptions) -> tuple[list[ServerSpec], list[str]]:
    """The MCP servers a run of `spec` uses: the user's `[[mcp]]`, then `[[workflow.mcp]]`.

    A server names a program to start, so an untrusted workspace workflow's
    servers are left out (with a note), as any widening it asks for is.
    """
    from normalize.permissions import UNTRUSTED_HINT, load_mcp_servers

    servers = {server.name: server for server in load_mcp_servers()}
    ignored: list[str] = []
    if spec.mcp:
        if spec.origin == "workspace":
            where = _shown(spec.path, options.workspace)
            names = ", ".join(server.name for server in spec.mcp)
            ignored.append(f"ignored [[workflow.mcp]] {names} from {where}: {UNTRUSTED_HINT}")
        else:
            servers.update((server.name, server) for server in spec.mcp)
    return list(servers.values()), ignored


def task_mcp_servers(task: Task, options: RunOptions) -> list[ServerSpec]:
    """The servers recorded when the task started (or, for an older task, found anew)."""
    from normalize.mcp.config import ServerSpec

    config = task.config
    if config.mcp_servers is not None:
        return [ServerSpec.from_dict(item) for item in config.mcp_servers]
    if config.permissions is not None or not config.spec:
        return []  # started with none (or from before servers were recorded, without a spec)
    return mcp_servers(WorkflowSpec.from_dict(config.spec), options)[0]


def open_task(ref: str, options: RunOptions) -> Task:
    """The task `ref` names (id, unique prefix or `last`)."""
    store = _store(options)
    return store.load(store.resolve(ref), repair=True)


def tool_context(task: Task, options: RunOptions) -> ToolContext:
    """The guard, cache and policy a task's actions run under."""
    from normalize.execution.cache import CacheSet, cache_from
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy
    from normalize.tools.guard import WorkspaceGuard

    store = _store(options)
    workspace = Path(task.workspace)
    table = CacheSettings.from_dict(task.config.spec_table.get("cache") or {})
    cache = cache_from(table, directory=store.cache_dir(task.id), redact=store.redact)
    caches = CacheSet(cache, store.cache_dir(task.id), redact=store.redact)
    perms = task_permissions(task, options)
    policy = ApprovalPolicy.from_config(perms.approval_config(),
                                        interactive=options.interactive)
    if task.driver == "user" and policy.mode is ApprovalMode.ASK:
        policy.mode = ApprovalMode.AUTO  # a person's own edits are not put to them again
    own = [*private_places(store.home, workspace), config_home()]  # an isolated copy: its own
    guard = WorkspaceGuard(workspace, protected=own)
    sandbox = replace(perms.sandbox_policy(), hidden=tuple(map(str, own)))
    refuse_unconfined(sandbox, policy.mode.value, options.interactive)
    refuse_state_in_workspace(sandbox, workspace, store.home)
    servers = task_mcp_servers(task, options)
    sessions = None
    if servers:
        from normalize.mcp.client import McpSessions

        sessions = McpSessions(servers, workspace=workspace, sandbox=sandbox)
    return ToolContext(workspace=workspace, guard=guard, cache=cache, policy=policy,
                       cancel=options.cancel, timeout=options.timeout,
                       approver=options.approver if options.interactive else None,
                       asker=options.asker if options.interactive else None, caches=caches,
                       sandbox=sandbox, mcp=sessions, children=spawner(task, options),
                       state_dir=harness_state(store.home, task.id))


def harness_state(home: Path, task_id: str) -> Path:
    """Where a harness driver keeps the task's sessions: beside the data home, not in it
    (programs cannot see the data home; a harness must write its own session files)."""
    return home.parent / f"{home.name}-harness" / task_id


def spawner(task: Task, options: RunOptions) -> Spawner:
    """The service behind `spawn`: the task's children run as local processes."""
    from normalize.children import MAX_CONCURRENCY
    from normalize.execution.local import LocalExecutor

    flags: list[str] = []
    if options.sandbox is not None:
        flags += ["--sandbox", options.sandbox]
    network = options.network
    if network is False:
        flags.append("--no-network")
    elif network is not None:  # every host ("*"), or those named
        for host in ("*",) if network is True else network:
            flags += ["--network", host]
    if options.approve:
        flags += ["--approve", options.approve]
    tracing = options.tracing
    if tracing is not None:
        flags.append("--otel")
    limit = int(os.environ.get("NORMALIZE_MAX_CONCURRENCY") or MAX_CONCURRENCY)
    return Spawner(task, _store(options), LocalExecutor(limit), cancel=options.cancel,
                   set_model=apply_model, flags=tuple(flags), judge=pick_judge(task, options),
                   child_env=tracing.child_env if tracing is not None else None)


def pick_judge(task: Task, options: RunOptions) -> Callable[[str, str], int]:
    """Best-of-N's judge: a pick command run in an attempt's copy, sandboxed as its programs."""

    def judge(workspace: str, command: str) -> int:
        import shlex

        from normalize.tools.run import run_process

        store, root = _store(options), Path(workspace)
        hidden = (*private_places(store.home, root), config_home())
        policy = replace(task_permissions(task, options).sandbox_policy(),
                         hidden=tuple(map(str, hidden)))
        try:
            outcome = run_process(shlex.split(command), cwd=root, timeout=options.timeout,
                                  cancel=options.cancel, sandbox=policy, workspace=root,
                                  label=task.id)
        except (ToolError, ValueError):  # it could not start (or its quotes never close)
            return 127
        ended = outcome.exit_code is not None and not (outcome.timed_out or outcome.cancelled)
        return outcome.exit_code if ended and outcome.exit_code is not None else -1

    return judge


def task_permissions(task: Task, options: RunOptions) -> Permissions:
    """The permissions recorded when the task started, with this run's flags on top.

    A task from before permissions were recorded is resolved anew from its
    stored spec (and its recorded `approve`).
    """
    from normalize.permissions import Permissions

    config = task.config
    if config.permissions is not None:
        return command_line(Permissions.from_dict(config.permissions), options)
    spec = WorkflowSpec.from_dict(config.spec) if config.spec else \
        WorkflowSpec(name=task.driver, path="", driver=task.driver)
    if config.approve and not options.approve:
        options = replace(options, approve=config.approve)
    return resolve_permissions(spec, options)


def driver_services(task: Task, options: RunOptions,
                    tools: ToolContext | None = None) -> DriverServices:
    """The caller's services, with what the run lends where the caller lent nothing.

    `replay:TASKID` looks the task up in the run's own store; the repo map is
    the tools' cached map of the task's workspace; `tools` (the run's tool
    context) lends its MCP servers' commands.
    """
    services, store = options.services, _store(options)
    lent: dict[str, Any] = {}
    if services.resolve_journal is None:
        lent["resolve_journal"] = lambda ref: store.journal_path(store.resolve(ref))
    if services.config_dir is None:  # where the user-wide AGENTS.md lives
        lent["config_dir"] = config_home()
    if services.repo_map is None:
        lent["repo_map"] = _repo_map(Path(task.workspace), store)
    if services.extra_commands is None and tools is not None and tools.mcp is not None:
        lent["extra_commands"] = tools.mcp.reference  # the MCP tools, in a model's prompt
    return replace(services, **lent)


def _repo_map(workspace: Path, store: TaskStore) -> Callable[[int], Callable[[], str]]:
    """Makes the tools' cached repo map of `workspace` within N tokens (kept in the store)."""

    def make(tokens: int) -> Callable[[], str]:
        from normalize.tools.code.mapcache import CachedRepoMap

        return CachedRepoMap(workspace, tokens, store.shared_cache_dir("repomap"),
                             redact=store.redact).text

    return make


def tier_notice(task: Task, options: RunOptions) -> str:
    """The one line naming what the sandbox tier leaves weaker for this task's programs, or ''."""
    if task_permissions(task, options).sandbox_policy().mode is SandboxMode.OFF:
        return ""
    return probe().notice()


def refuse_state_in_workspace(sandbox: SandboxPolicy, workspace: Path, store: Path) -> None:
    """A `UsageError` when the landlock tier would leave normalize's state to programs.

    Landlock cannot take a subtree out of the writable workspace, so a data
    home or config dir inside it would be readable and writable by every
    program; the full tier hides them with a mount instead.
    """
    if sandbox.mode is not SandboxMode.WORKSPACE:
        return
    root = workspace.resolve()
    inside = [(name, path) for name, path in _state_dirs(store)
              if path.resolve() == root or root in path.resolve().parents]
    if inside and probe().tier is SandboxTier.LANDLOCK:
        name, path = inside[0]
        raise UsageError(f"{name}: {path} is inside the workspace, and the landlock sandbox tier "
                         f"(no namespaces here) cannot hide it from programs; set {name} to a "
                         f"directory outside {root}")


def _state_dirs(store: Path) -> list[tuple[str, Path]]:
    """normalize's data home and config dir, each with the variable that sets it."""
    data = "NORMALIZE_HOME" if os.environ.get("NORMALIZE_HOME") else "XDG_DATA_HOME"
    config = ("NORMALIZE_CONFIG" if os.environ.get("NORMALIZE_CONFIG")
              else "NORMALIZE_HOME" if os.environ.get("NORMALIZE_HOME") else "XDG_CONFIG_HOME")
    return [(data, store), (config, config_home())]


def refuse_unconfined(sandbox: SandboxPolicy, approve: str, interactive: bool) -> None:
    """Fail closed: a `UsageError` when programs could run unconfined with no person to ask."""
    if sandbox.mode is SandboxMode.OFF or approve == "never" or (approve == "ask" and interactive):
        return
    found = probe()
    if not found.available:
        raise UsageError(f"the sandbox is unavailable ({found.reason}); programs would run "
                         f"unconfined, so this run is refused; pass --sandbox off to run "
                         f"them anyway")


def make_driver(task: Task, options: RunOptions, tools: ToolContext | None = None) -> Driver:
    """The task's driver, built with everything it is lent (`tools`: the run's tool context)."""
    return create_driver(task.driver, task.config.to_driver_json(),
                         driver_services(task, options, tools))


def with_model(llm: LLMTable | None, model: str | None, base_url: str | None = None
               ) -> LLMTable:
    """A workflow's typed `llm` table with a `PROVIDER:MODEL` spec and a base URL put in."""
    table: dict[str, Any] = llm.to_dict() if llm is not None else {}
    apply_model(table, model, base_url)
    return LLMTable.from_config(table)


def apply_model(llm: dict[str, Any], model: str | None, base_url: str | None = None) -> None:
    """Put a `PROVIDER:MODEL` spec and a base URL into a workflow's `llm` table."""
    from normalize.drivers.llm import LLMSettings, names_provider
    from normalize.providers.registry import parse_spec

    if model:
        provider, name = parse_spec(model)
        if LLMSettings.from_config(llm).spec.split(":", 1)[0] != provider:
            # the workflow's bare fallback names belong to its own provider: drop them
            llm["fallback"] = [f for f in llm.get("fallback", []) if names_provider(f)]
        llm["provider"], llm["model"] = provider, name
    if base_url:
        llm["base_url"] = base_url


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
        if driver in ("claude", "codex", "aider"):  # the harness's own model server
            harness = {k: v for k, v in (("model", model), ("base_url", base_url)) if v}
            task.config = replace(task.config, extra={**task.config.extra, "harness": {
                **(task.config.extra.get("harness") or {}), **harness}})
        elif driver != "llm":
            flag = "--model" if model is not None else "--base-url"
            raise UsageError(f"{flag} goes with --driver llm, not --driver {driver}")
        else:
            switch_model(task, model, base_url)
    previous, task.driver = task.driver, driver
    return previous


def workspace_checkpoints(task: Task, store: TaskStore) -> WorkspaceCheckpoints | None:
    """The recorder of the task's workspace checkpoints (None when turned off)."""
    from normalize.checkpoints import WorkspaceCheckpoints

    return WorkspaceCheckpoints.for_workspace(Path(task.workspace), store.home, store.task_path)


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
    if task.driver not in ("llm", "claude", "codex", "aider"):  # a model's, or a harness's
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
    """Drive `task` to its next resting point."""
    from normalize.tools import default_tools

    store = _store(options)
    if not os.path.isdir(task.workspace):
        raise UsageError(f"workspace {task.workspace} of task {task.id} no longer exists")
    tools = options.tools or default_tools()
    tool_ctx = tool_context(task, options)
    try:
        driver = driver or make_driver(task, options, tool_ctx)
        notes = [] if resumed else list(task.config.permission_notes)
        subscribers = list(options.subscribers)
        if options.tracing is not None:
            subscribers.append(options.tracing)
        hooks, ignored = task_hooks(task)
        engine = Engine(store, tools, tool_ctx, cancel=options.cancel,
                        subscribers=subscribers, interactive=options.interactive,
                        workspace_checkpoints=workspace_checkpoints(task, store), hooks=hooks)
        notes = [*notes, *ignored]
        if notes:
            engine.subscribers.append(_announcer(engine, notes))
        return engine.run(task, driver, resumed=resumed, reply=reply)
    finally:
        if tool_ctx.mcp is not None:
            tool_ctx.mcp.close()  # every server this run started stops with it


def task_hooks(task: Task) -> tuple[HookRunner | None, list[str]]:
    """The user's hooks, then a trusted workflow's; an untrusted workflow's are left out, said."""
    from normalize.hooks import Hook, HookRunner
    from normalize.permissions import UNTRUSTED_HINT, load_user_hooks

    hooks = list(load_user_hooks())
    spec = task.config.spec_table
    tables, notes = spec.get("hooks") or [], []
    if tables and spec.get("origin") == "workspace":
        where = _shown(str(spec.get("path", "")), Path(task.workspace))
        notes.append(f"ignored {len(tables)} hook(s) of {where}: {UNTRUSTED_HINT}")
    elif tables:  # checked when the workflow was loaded
        hooks.extend(Hook.from_dict(table) for table in tables)
    runner = HookRunner(hooks, Path(task.workspace), task.id) if hooks else None
    return runner, notes


def run_flow(root: object, *, goal: str = "", options: RunOptions | None = None,
             overrides: Mapping[str, Any] | None = None, **compile_options: Any) -> RunOutcome:
    """Compile a Python flow and run it as a task: the same engine, events and store as TOML."""
    from normalize.workflow.flow import compile_flow

    options = options or RunOptions()
    spec = compile_flow(root, base_dir=options.workspace, overrides=overrides,
                        **compile_options)
    return run_task(start_task(spec, goal, options), options)


def _announcer(engine: Engine, notes: list[str]) -> Subscriber:
    """Emits the ignored permissions as warnings right after `run_started`, once."""
    from normalize.events import Event, Notice, RunStarted

    pending = list(notes)

    def announce(event: Event) -> None:
        if isinstance(event, RunStarted) and pending:
            for message in pending:
                engine.emit(Notice(level="warning", message=message))
            pending.clear()

    return announce
