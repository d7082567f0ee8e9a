"""What the CLI commands do, as plain functions returning an exit status."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from normalize.cli.approve import approver
from normalize.cli.console import (
    Environment,
    fail,
    line_reader,
    prompt_reader,
)
from normalize.cli.launch import (
    Going,
    run_options,
    set_limits,
    set_output_retries,
    start,
    to_the_end,
    workspace_root,
)
from normalize.cli.outcome import REPLY_FLAGS, shown_question
from normalize.cli.requests import (
    Answer,
    FollowUp,
    Fork,
    HandOver,
    Launch,
    Resume,
    ResumeWay,
    Rewind,
    Run,
)
from normalize.errors import ExitStatus, NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.cli.console import Renderer
    from normalize.engine import Reply
    from normalize.events import ActionFinished
    from normalize.runner import RunOptions
    from normalize.store import TaskStore
    from normalize.task import Task, Wait


def pin_replay(model: str | None) -> str | None:
    """`replay:last` (or a prefix) as the task it names now, before a new task becomes `last`."""
    if model is None or not model.startswith("replay:"):
        return model
    ref = model.split(":", 1)[1]
    if not ref or Path(ref).is_file():
        return model
    from normalize.store import TaskStore

    return f"replay:{TaskStore().resolve(ref)}"


def run_workflow(env: Environment, request: Run) -> int:
    """`normalize run WORKFLOW`: its plan (`--dry-run`), or a task run to its end."""
    from normalize.runner import load_spec, parse_vars, with_model

    try:
        root = workspace_root(request.workspace)
        spec = load_spec(request.workflow, root, parse_vars(list(request.variables)))
        model = pin_replay(request.model)
        if model or request.base_url:
            spec.llm = with_model(spec.llm, model, request.base_url)
        set_output_retries(spec, request.output_retries, request.output_schema)
        if request.dry_run:
            from normalize.cli.plan import print_plan, print_plan_json

            (print_plan_json if request.json_output else print_plan)(env, spec, request.goal, root)
            return 0
        if spec.llm is not None:
            from normalize.cli.modelcheck import local_server_down

            local_server_down(spec.llm)  # a local model server not started: said before a task
        options, renderer = launch_options(env, request, root)
        task = start(env, spec, request.goal, options, output_schema=request.output_schema,
                     max_turns=request.max_turns, named=request.json_output or request.quiet)
        return to_the_end(env, task, options, renderer, json_output=request.json_output,
                          going=Going(typed=False))
    except NormalizeError as exc:
        return fail(env, exc)


def launch_options(env: Environment, request: Launch, workspace: Path | None
                   ) -> tuple[RunOptions, Renderer]:
    """The options and renderer a request runs under (`run_options`, memory)."""
    options, renderer = run_options(env, workspace=workspace, json_output=request.json_output,
                                    quiet=request.quiet, approve=request.approve,
                                    sandbox=request.sandbox, network=request.network_setting(),
                                    otel=request.otel)
    options.memory = request.memory
    return options, renderer


def batch_of(ref: str) -> tuple[str, bool]:
    """The id `ref` names and whether it is a batch (a cheap look for `resume`); `ref` itself
    when it names nothing (resuming it says why). Resolved once: `last` reads the store."""
    from normalize.homes import is_batch
    from normalize.store import TaskStore

    store = TaskStore()
    try:
        task_id = store.resolve(ref)
    except NormalizeError:
        return ref, False
    return task_id, is_batch(store.home, task_id)


def resume_task(env: Environment, request: Resume, ref: str) -> int:
    """`normalize resume ID`: the task goes on in the request's one way, to its end."""
    try:
        way = request.way
        if way is None or isinstance(way, HandOver | Answer):
            ref = _resumable(ref)  # a done task says so before the engine is even loaded
        from normalize.contract.driver import driver_traits
        from normalize.runner import open_task

        options, renderer = launch_options(env, request, None)
        task = _went_on(env, open_task(ref, options), options, request)
        _refuse_resume_limits(task, request)
        options.workspace = Path(task.workspace)
        from normalize.cli.sandbox import report_tier

        report_tier(env, task, options)
        reply = _reply(env, task, options, way)
        _switch_driver_or_model(env, task, options, request)
        set_limits(task, max_turns=request.max_turns, budget=request.budget)
        ask = options.interactive and not request.quiet and driver_traits(task.driver).follow_ups
        read = prompt_reader(env, lambda: options.workspace, cancel=options.cancel) \
            if ask else None
        return to_the_end(env, task, options, renderer, json_output=request.json_output,
                          going=Going(resumed=True, reply=reply, read=read))
    except NormalizeError as exc:
        return fail(env, exc)


def _reply(env: Environment, task: Task, options: RunOptions, way: ResumeWay) -> Reply | None:
    """The answer the task goes on with: `--answer`'s (checked), or asked for at a terminal."""
    from normalize.engine import Reply, reply_text

    if isinstance(way, Answer):
        reply = Reply(answer=way.text)
        _check_reply(task, reply, reply_text)
        return reply
    if task.pending is not None and options.interactive:
        return _ask_pending(env, task)
    return None


def _went_on(env: Environment, task: Task, options: RunOptions, request: Resume) -> Task:
    """The task as `request`'s way leaves it before it runs: forked, rewound, or given its
    follow-up; a done task asked to go on plainly is refused."""
    from normalize.runner import follow_up

    way = request.way
    if isinstance(way, FollowUp):
        follow_up(task, way.instruction)  # a finished task goes on with the new instruction
        return task
    if isinstance(way, Fork):
        task = _fork(env, task, options, way, request.json_output)
    elif isinstance(way, Rewind):
        task = _rewind(env, task, options, way.step, request.json_output)
    if not task.status.resumable:
        raise _already_done(task.id)
    return task


def _fork(env: Environment, task: Task, options: RunOptions, fork: Fork,
          json_output: bool) -> Task:
    """A new task in a copy, from the last step or `--rewind N`; the task itself unchanged."""
    from normalize.subtasks.fork import fork_task

    original, task = task.id, fork_task(options.task_store(), task, fork.at,
                                        in_place=fork.in_place)
    at = "its last step" if fork.at is None else f"step #{fork.at}"
    _said(env, json_output, f"task {original}: forked at {at} as {task.id} in "
                            f"{task.workspace}; the fork goes on, {original} is left "
                            f"as it was")
    return task


def _rewind(env: Environment, task: Task, options: RunOptions, step: int,
            json_output: bool) -> Task:
    """Files and task state back to `step` (issue 15), said."""
    from normalize.checkpoints.changes import rewind_task

    task = rewind_task(options.task_store(), task, step)
    _said(env, json_output, f"task {task.id}: rewound to step #{step} (its files and "
                            f"its state as after that step); it goes on from there")
    return task


def _refuse_resume_limits(task: Task, request: Resume) -> None:
    """Refuse a `--max-turns` the task has already run, and `--approve` where an approval
    waits for its answer."""
    max_turns, approve = request.max_turns, request.approve
    if max_turns is not None and max_turns <= task.turn:
        raise UsageError(f"--max-turns {max_turns}: task {task.id} has already run "
                         f"{task.turn} turns (--max-turns is the total, as in run and "
                         f"agent: give more than {task.turn})")
    if approve is not None and not isinstance(request.way, Answer) \
            and task.pending is not None and task.pending.kind == "approval":
        raise UsageError(f"--approve {approve} sets the approval mode; task {task.id} waits "
                         f"for: {shown_question(task)} — answer it with --answer yes|no")


def _switch_driver_or_model(env: Environment, task: Task, options: RunOptions,
                            request: Resume) -> None:
    """Hand the task over to `--driver` (said, with its recent results when that driver shows
    them), or switch its model or base URL."""
    from normalize.contract.driver import driver_traits
    from normalize.runner import hand_over, switch_model

    driver, model, base_url = request.driver, request.model, request.base_url
    if driver is not None and driver != task.driver:
        from normalize.tools.harness import HARNESSES

        if driver in HARNESSES:  # refused before it runs: not installed, too old, no key
            check_harness(driver)
        previous = hand_over(task, driver, model=model, base_url=base_url)
        if not request.quiet:
            env.stderr.write(f"task {task.id}: handing over from {previous} to {driver} "
                             f"at turn {task.turn}\n")
            if driver_traits(driver).shows_results:
                _show_recent(env, task.id, options.task_store())
    elif model is not None or base_url is not None:
        switch_model(task, model, base_url)


def acp_command(harness: str) -> list[str]:
    """The agent's argv in `--harness acp:COMMAND`; its program must be found."""
    import shlex
    import shutil
    from importlib.util import find_spec

    try:
        argv = shlex.split(harness.removeprefix("acp:"))
    except ValueError as exc:
        raise UsageError(f"--harness {harness}: {exc}") from None
    if not argv:
        raise UsageError("--harness acp:COMMAND needs the ACP agent's command, e.g. "
                         "acp:'gemini --experimental-acp'")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"--harness {harness}: program not found: {argv[0]}")
    if find_spec("acp") is None:
        raise UsageError("--harness acp:… needs the Agent Client Protocol SDK: "
                         "pip install 'normalize[acp]'")
    return argv


def with_acp_command(task: Task, harness: str | None, options: RunOptions) -> None:
    """Record `--harness acp:COMMAND`'s argv in the task (its driver starts it each run)."""
    if harness is None or not harness.startswith("acp:"):
        return
    from dataclasses import replace

    config = task.config
    task.config = replace(config, extra={**config.extra, "acp": {"command": acp_command(harness)}})
    options.task_store().save(task)


def last_here(env: Environment, json_output: bool) -> str:
    """`resume last`: the newest task of this directory (its workspace holds it), else the
    newest of all, with a line naming that task's workspace."""
    from normalize.store import TaskStore
    from normalize.store.index import ID, UPDATED, WORKSPACE

    store = TaskStore()
    here = Path.cwd().resolve()
    rows, _ = store.rows()
    mine = [row for row in rows if row[WORKSPACE]
            and (here == Path(str(row[WORKSPACE])) or Path(str(row[WORKSPACE])) in here.parents)]
    if mine:
        return str(max(mine, key=lambda row: (row[UPDATED] or 0.0, row[ID]))[ID])
    try:
        task_id = store.resolve("last")
        workspace = store.state(task_id).get("workspace")
    except (NormalizeError, ValueError):
        return "last"  # resuming it says why, after the flags are checked
    _said(env, json_output, f"task {task_id}: the last task, of {workspace} (none is of "
                            f"this directory)")
    return task_id


def _resumable(ref: str) -> str:
    """The id `ref` names, unless that task is done (`UsageError`): read from its state alone."""
    from normalize.store import TaskStore
    from normalize.task import SCHEMA_VERSION, TaskStatus

    store = TaskStore()
    task_id = store.resolve(ref)
    try:
        state = store.state(task_id)
    except ValueError:  # damaged: resume's own load says so, and moves it aside
        return task_id
    status = str(state.get("status"))
    known = status in TaskStatus.__members__.values()
    if known and not TaskStatus(status).resumable and state.get("schema_version") == SCHEMA_VERSION:
        raise _already_done(task_id)
    return task_id


def _already_done(task_id: str) -> UsageError:
    return UsageError(f"task {task_id} is already done; give it a follow-up with "
                      f'normalize resume {task_id} "NEXT INSTRUCTION"')


def _check_reply(task: Task, reply: Reply,
                 reply_text: Callable[[Wait, Reply | None], str | None]) -> None:
    """A reply flag must answer what the task waits for: one clear line otherwise."""
    pending = task.pending
    if pending is None:
        raise UsageError(f"task {task.id} is not waiting for input (it is "
                         f"{task.status.value}); resume it without --answer")
    if reply_text(pending, reply) is None:
        raise UsageError(f"task {task.id} waits for: {shown_question(task)} — answer with "
                         f"{REPLY_FLAGS.get(pending.kind, '--answer TEXT')}")


def _show_recent(env: Environment, task_id: str, store: TaskStore, limit: int = 5) -> None:
    """The last few actions, so the person taking over knows where the task stands."""
    from normalize.cli.describe import journal_events, recent_actions

    for line in recent_actions(journal_events(store.tail(task_id, 200)), limit):
        env.stderr.write(line + "\n")
    env.stderr.write("  type commands (e.g. `view .`, `run pytest`), `done` to finish\n")


def _ask_pending(env: Environment, task: Task) -> Reply | None:
    from normalize.engine import Reply

    read = line_reader(env)
    pending = task.pending
    if pending is None:
        return None
    if pending.kind == "approval":
        reply = approver(env, lambda: None)(pending.question)
        return Reply(approve=reply in ("yes", "always"))
    text = read(f"{pending.question}\n> ")
    return None if text is None else Reply(answer=text)


def _said(env: Environment, json_output: bool, line: str) -> None:
    """A line before the run, where its view shows (stderr under --json)."""
    stream = env.stderr if json_output else env.stdout
    stream.write(line + "\n")
    stream.flush()


def show_task(env: Environment, ref: str, *, json_output: bool, full: bool = False) -> int:
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        # the task's state, not its driver config; the events are streamed, never all held
        task = store.shown(load_or_salvage(env, store, store.resolve(ref), with_config=False))
    except NormalizeError as exc:
        return fail(env, exc)
    events = store.events(task.id)
    if json_output:
        _write_task_json(env, task, events)
        _warn_store(env, store)
        return 0
    out = env.stdout
    _write_task_facts(out, task)
    collected = {e["child_id"]: e for e in store.events(task.id)
                 if e.get("type") == "child_collected"} if task.children else {}
    for line in _children_lines(store, task.children, collected):
        out.write(line)
    out.write("steps:\n")
    from normalize.cli.describe import SHOW_LINES, history, journal_events, step_output

    def output(event: ActionFinished) -> list[str]:
        whole = None
        if full and event.cache_id:
            from normalize.cli.render import cache_reader

            whole = cache_reader(lambda: store)(task.id, event.cache_id)
        return step_output(event, full_text=whole, lines=None if full else SHOW_LINES)

    for line in history(journal_events(events, unknown=True), output,
                        net_changes(store, task)):
        out.write(line + "\n")
    _warn_store(env, store)
    return 0


def _write_task_json(env: Environment, task: Task, events: Iterable[dict[str, Any]]) -> None:
    """`tasks show --json`: the task and its events, streamed one event at a time."""
    from normalize.redact import inert_obj

    env.stdout.write(json.dumps({"task": task.to_dict()})[:-1] + ', "events": [')
    for number, event in enumerate(events):
        env.stdout.write((", " if number else "") + json.dumps(inert_obj(event)))
    env.stdout.write("]}\n")


def _write_task_facts(out: TextIO, task: Task) -> None:
    """The head of `tasks show`: status, goal, driver, where, counts, cost and how it ended."""
    from normalize.cli.taskinput import shown_goal

    out.write(f"task {task.id}  {task.status.value}\n")
    out.write(f"  goal:      {shown_goal(task.goal)}\n  driver:    {task.driver}\n")
    out.write(f"  workspace: {task.workspace}\n")
    if task.workflow:
        out.write(f"  workflow:  {task.workflow}\n")
    out.write(f"  turns:     {task.turn}   actions: {task.actions_run}   "
              f"elapsed: {task.elapsed:.1f}s\n")
    if task.usage.requests:
        u = task.usage
        kids = f" (+ ${u.children_cost_usd:.4f} by sub-tasks)" if u.children_cost_usd else ""
        out.write(f"  tokens:    {u.input_tokens:,} in / {u.output_tokens:,} out   "
                  f"cost: ${u.cost_usd:.4f}{kids}\n")
    if task.summary:
        out.write(f"  summary:   {task.summary}\n")
    if task.error:
        out.write(f"  error:     {task.error}\n")
    if task.result is not None:
        from normalize.cli.describe import result_lines

        out.write("  result:\n" + "".join(f"    {line}\n" for line in result_lines(task.result)))
    if task.pending is not None:
        out.write(f"  waiting:   {task.pending.question}\n")
    if task.parent:
        out.write(f"  parent:    {task.parent}\n")


def load_or_salvage(env: Environment, store: TaskStore, task_id: str, *,
                    with_config: bool = True) -> Task:
    """The stored task, or, when its file is damaged, the task as its journal tells it (with
    a warning naming the damage and where the file was moved)."""
    from normalize.errors import CorruptTaskError

    try:
        return store.load(task_id, with_config=with_config)
    except CorruptTaskError as exc:
        task = store.salvage(task_id)
        if task is None:
            raise
        env.stderr.write(f"normalize: warning: {exc}; shown from its journal\n")
        env.stderr.flush()
        return task


def _children_lines(store: TaskStore, children: list[str],
                    collected: dict[str, dict[str, Any]]) -> list[str]:
    """`tasks show`'s children: one line each with its status, cost and goal (and, for a
    best-of-N attempt, its number, pick exit, diff stat and whether it was picked)."""
    lines = ["children:\n"] if children else []
    for child_id in children:
        try:
            child = store.shown(store.load(child_id, with_config=False))
        except NormalizeError as exc:
            lines.append(f"  {child_id}  unreadable: {exc}\n")
            continue
        goal = child.goal.splitlines()[0] if child.goal.strip() else ""
        lines.append(f"  {child.id}  {child.status.value:<14} ${child.usage.total_cost_usd:.4f}  "
                     f"{_attempt(collected.get(child.id))}{goal[:60]}\n")
    return lines


def _attempt(seen: dict[str, Any] | None) -> str:
    """A best-of-N attempt's columns: `#2 pick: exit 0  1 file changed, … picked  `."""
    if not seen or not seen.get("attempt"):
        return ""
    from normalize.redact import inert

    pick = seen.get("pick_exit")
    stat = (str(seen.get("diff_stat") or "").splitlines() or ["no changes"])[-1].strip()
    mark = "  picked" if seen.get("picked") else ""
    return (f"#{seen['attempt']} pick: {'-' if pick is None else f'exit {pick}'}  "
            f"{inert(stat)}{mark}  ")


def net_changes(store: TaskStore, task: Task) -> dict[str, list[int]] | None:
    """The task's `+/-` lines per file from before it to now, as `diff --stat` counts them
    (None without checkpoints: `tasks show` then sums its steps')."""
    from normalize.checkpoints.changes import TaskChanges
    from normalize.checkpoints.shadow import shown
    from normalize.redact import Redactor, inert

    try:
        counts = TaskChanges.open(store, task).numstat(None)
    except NormalizeError:
        return None
    redactor = Redactor.for_workspace(task.workspace)  # a file name shown as every screen shows it
    return {inert(redactor.redact(shown(path))): [max(a, 0), max(r, 0)]
            for path, (a, r) in counts.items()}


def _warn_store(env: Environment, store: TaskStore) -> None:
    for warning in store.warnings:
        env.stderr.write(f"normalize: warning: {warning}\n")


def remove_task(env: Environment, ref: str) -> int:
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        task_id = store.resolve(ref)
        store.remove(task_id)
    except NormalizeError as exc:
        return fail(env, exc)
    env.stdout.write(f"removed task {task_id}\n")
    return int(ExitStatus.DONE)


def check_harness(name: str) -> str:
    """The driver name of harness `name`, once its CLI is found; a `UsageError` before a task.

    `acp:COMMAND` is any Agent Client Protocol agent (the `acp` driver)."""
    if name.startswith("acp:"):
        acp_command(name)
        return "acp"
    from normalize.errors import ToolError
    from normalize.tools.harness import harness_named
    from normalize.tools.harness.preflight import preflight

    try:
        preflight(harness_named(name))
    except ToolError as exc:
        raise UsageError(f"--harness {name}: {exc}") from None
    return name
