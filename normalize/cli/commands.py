"""What the CLI commands do, as plain functions returning an exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from normalize.cli.approve import approver
from normalize.cli.console import (
    Environment,
    SignalCancel,
    fail,
    held,
    line_reader,
    prompt_reader,
)
from normalize.cli.outcome import REPLY_FLAGS, finish, shown_question, stopping_note
from normalize.errors import ExitStatus, NormalizeError, UsageError
from normalize.structured import OutputContract


def run_options(env: Environment, *, workspace: Path | None, json_output: bool, quiet: bool,
                approve: str | None = None, sandbox: str | None = None,
                network: bool | tuple[str, ...] | None = None, otel: bool = False
                ) -> tuple[Any, Any]:
    """The RunOptions a command runs under (terminal, approvals, prompt, traces), its renderer."""
    from normalize.contract.driver import DriverServices
    from normalize.runner import RunOptions
    from normalize.tools.approval import ApprovalMode

    modes = [m.value for m in ApprovalMode]
    if approve is not None and approve not in modes:
        raise UsageError(f"--approve {approve}: unknown approval mode (choose from "
                         f"{', '.join(modes)})")
    _check_sandbox(env, sandbox)
    from normalize.cli.render import cache_reader, make_renderer

    holder: list[Any] = []
    renderer = make_renderer(env, json_output=json_output, quiet=quiet,
                             full_text=cache_reader(lambda: holder[0].store if holder else None))
    interactive = env.stdin_tty and env.stdout_tty and not json_output

    def current() -> Any:  # the renderer showing the run now (a follow-up run has its own)
        return holder[0].subscribers[0] if holder and holder[0].subscribers else renderer

    read = held(line_reader(env), current)
    options = RunOptions(
        workspace=(workspace or Path.cwd()).resolve(),
        subscribers=[renderer],
        interactive=interactive,
        approve=approve,
        sandbox=sandbox,
        network=network,
        approver=approver(env, current) if interactive else None,
        asker=(lambda q: read(f"{q}\n> ")) if interactive else None,
    )
    holder.append(options)
    options.tracing = tracing(env, otel)
    options.services = DriverServices(read_line=prompt_reader(
        env, lambda: options.workspace, current=current, cancel=options.cancel))
    return options, renderer


def tracing(env: Environment, flag: bool) -> Any:
    """The run's tracing when `--otel` or an OTLP endpoint asks for it; None otherwise.

    With only the variable set and OpenTelemetry absent, one line says so and
    the task runs untraced; `--otel` then refuses (the person asked for it).
    """
    from normalize.telemetry import tracing_wanted

    if not tracing_wanted(flag, env.env):
        return None
    from normalize.redact import Redactor
    from normalize.telemetry import start_tracing

    try:
        return start_tracing(env.env, redact=Redactor.for_workspace(".", env.env,
                                                                     walk=False).redact)
    except UsageError as exc:
        if flag:
            raise
        env.stderr.write(f"normalize: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but {exc}; "
                         f"no traces ({exc.hint})\n")
        return None


def _check_sandbox(env: Environment, sandbox: str | None) -> None:
    """Refuse an unknown `--sandbox` before any task exists; warn about `--sandbox off`."""
    from normalize.sandbox import SandboxMode

    modes = [m.value for m in SandboxMode]
    if sandbox is not None and sandbox not in modes:
        raise UsageError(f"--sandbox {sandbox}: unknown sandbox mode (choose from "
                         f"{', '.join(modes)})")
    if sandbox == SandboxMode.OFF:
        env.stderr.write("normalize: warning: --sandbox off: programs run unconfined, with "
                         "your full rights (only the environment is scrubbed)\n")


def set_limits(task: Any, *, max_turns: int | None = None, budget: float | None = None) -> None:
    """`--max-turns` (the total) and `--budget`, for the driver the task now runs with only."""
    if max_turns is None and budget is None:
        return
    if max_turns is not None:
        task.limits.max_turns = max_turns
    if budget is not None:
        task.limits.max_cost_usd = budget
    task.limits.driver = task.driver


def pin_replay(model: str | None) -> str | None:
    """`replay:last` (or a prefix) as the task it names now, before a new task becomes `last`."""
    if model is None or not model.startswith("replay:"):
        return model
    ref = model.split(":", 1)[1]
    if not ref or Path(ref).is_file():
        return model
    from normalize.store import TaskStore

    return f"replay:{TaskStore().resolve(ref)}"


def set_output_retries(spec: Any, retries: int | None, schema: Path | None) -> None:
    """`--output-retries N` into the workflow's spec; refused where no result has a schema."""
    if retries is None:
        return
    if schema is None and not spec.output_schema:
        raise UsageError(f"--output-retries {retries}: goes with --output-schema (or a workflow "
                         f"with output_schema)")
    spec.output_retries = retries


def contract_for(driver: str, path: Path) -> OutputContract:
    """The `--output-schema` contract, for a workflow a model drives (it gives the result)."""
    from normalize.structured import load_contract

    if driver != "llm":
        raise UsageError(f"--output-schema {path}: needs a workflow a model drives "
                         f"(this one's driver is {driver})")
    return load_contract(path)


def run_workflow(env: Environment, ref: str, pairs: list[str], *, goal: str,
                 workspace: Path | None, max_turns: int | None, approve: str | None,
                 dry_run: bool, json_output: bool, quiet: bool, model: str | None = None,
                 base_url: str | None = None, sandbox: str | None = None,
                 network: bool | tuple[str, ...] | None = None,
                 output_schema: Path | None = None, output_retries: int | None = None,
                 otel: bool = False) -> int:
    from normalize.runner import apply_model, load_spec, parse_vars, run_task, start_task

    try:
        root = (workspace or Path.cwd()).resolve()
        if not root.is_dir():
            raise UsageError(f"--workspace {root}: not a directory")
        spec = load_spec(ref, root, parse_vars(pairs))
        model = pin_replay(model)
        if model or base_url:
            spec.llm = dict(spec.llm or {})
            apply_model(spec.llm, model, base_url)
        set_output_retries(spec, output_retries, output_schema)
        if dry_run:
            from normalize.cli.plan import print_plan, print_plan_json

            (print_plan_json if json_output else print_plan)(env, spec, goal, root)
            return 0
        options, renderer = run_options(env, workspace=root, json_output=json_output,
                                        quiet=quiet, approve=approve, sandbox=sandbox,
                                        network=network, otel=otel)
        if output_schema is not None:
            options.output = contract_for(spec.driver, output_schema)
        task = start_task(spec, goal, options)
        set_limits(task, max_turns=max_turns)
        if json_output or quiet:  # otherwise the run's first line names it
            env.stderr.write(f"task {task.id}\n")
        from normalize.cli.sandbox import report_tier
        from normalize.cli.trust import report_ignored

        report_ignored(env, task)
        report_tier(env, task, options)
        with SignalCancel(options.cancel, notify=stopping_note(env)):
            outcome = run_task(task, options)
        return finish(env, outcome, renderer, json_output)
    except NormalizeError as exc:
        return fail(env, exc)


def resume_task(env: Environment, ref: str, *, answer: str | None, approve: str | None,
                driver: str | None, max_turns: int | None, budget: float | None,
                json_output: bool, quiet: bool, model: str | None = None,
                sandbox: str | None = None, network: bool | tuple[str, ...] | None = None,
                rewind: int | None = None, instruction: str | None = None,
                fork: bool = False, base_url: str | None = None, otel: bool = False) -> int:
    try:
        if (model is not None or base_url is not None) and (driver or "llm") != "llm":
            raise UsageError(f"{'--model' if model is not None else '--base-url'} goes with "
                             "--driver llm")
        if instruction is None and rewind is None and not fork:
            ref = _resumable(ref)  # a done task says so before the engine is even loaded
        from normalize.engine import Reply, reply_text
        from normalize.runner import follow_up, hand_over, open_task, switch_model

        options, renderer = run_options(env, workspace=None, json_output=json_output,
                                        quiet=quiet, approve=approve, sandbox=sandbox,
                                        network=network, otel=otel)
        task = open_task(ref, options)
        if fork:  # a new task in a copy, from the last step or --rewind N; the task unchanged
            from normalize.fork import fork_task

            original, task = task.id, fork_task(options.store, task, rewind)
            env.stderr.write(f"task {original}: forked as {task.id} in {task.workspace}\n")
        elif rewind is not None:  # files and task state back to that step (issue 15)
            from normalize.checkpoints.changes import rewind_task

            task = rewind_task(options.store, task, rewind)
        if instruction is not None:
            follow_up(task, instruction)  # a finished task goes on with the new instruction
        elif task.status.value == "done":
            raise _already_done(task.id)
        if max_turns is not None and max_turns <= task.turn:
            raise UsageError(f"--max-turns {max_turns}: task {task.id} has already run "
                             f"{task.turn} turns (--max-turns is the total, as in run and "
                             f"agent: give more than {task.turn})")
        if approve is not None and answer is None and task.pending is not None \
                and task.pending.kind == "approval":
            raise UsageError(f"--approve {approve} sets the approval mode; task {task.id} waits "
                             f"for: {shown_question(task)} — answer it with --answer yes|no")
        options.workspace = Path(task.workspace)
        from normalize.cli.sandbox import report_tier

        report_tier(env, task, options)
        reply = None
        if answer is not None:
            reply = Reply(answer=answer)
            _check_reply(task, reply, reply_text)
        elif task.pending is not None and options.interactive:
            reply = _ask_pending(env, task)
        if driver is not None and driver != task.driver:
            previous = hand_over(task, driver, model=model, base_url=base_url)
            if not quiet:
                env.stderr.write(f"task {task.id}: handing over from {previous} to {driver} "
                                 f"at turn {task.turn}\n")
                if driver == "user":
                    _show_recent(env, task.id, options.store)
        elif model is not None or base_url is not None:
            switch_model(task, model, base_url)
        set_limits(task, max_turns=max_turns, budget=budget)
        from normalize.cli.follow import after_run, run_at_terminal

        outcome = run_at_terminal(env, task, options, renderer, resumed=True, reply=reply)
        code = finish(env, outcome, renderer, json_output)
        ask = options.interactive and not quiet and task.driver == "llm"  # as after `agent`
        return after_run(env, outcome, options, code, prompt_reader(
            env, lambda: options.workspace, cancel=options.cancel) if ask else None)
    except NormalizeError as exc:
        return fail(env, exc)


def _resumable(ref: str) -> str:
    """The id `ref` names, unless that task is done (`UsageError`): read from its state alone."""
    from normalize.store import TaskStore
    from normalize.task import SCHEMA_VERSION

    store = TaskStore()
    task_id = store.resolve(ref)
    try:
        state = store.state(task_id)
    except ValueError:  # damaged: resume's own load says so, and moves it aside
        return task_id
    done = state.get("status") == "done" and state.get("schema_version") == SCHEMA_VERSION
    if done:
        raise _already_done(task_id)
    return task_id


def _already_done(task_id: str) -> UsageError:
    return UsageError(f"task {task_id} is already done; give it a follow-up with "
                      f'normalize resume {task_id} "NEXT INSTRUCTION"')


def _check_reply(task: Any, reply: Any, reply_text: Any) -> None:
    """A reply flag must answer what the task waits for: one clear line otherwise."""
    pending = task.pending
    if pending is None:
        raise UsageError(f"task {task.id} is not waiting for input (it is "
                         f"{task.status.value}); resume it without --answer")
    if reply_text(pending, reply) is None:
        raise UsageError(f"task {task.id} waits for: {shown_question(task)} — answer with "
                         f"{REPLY_FLAGS.get(pending.kind, '--answer TEXT')}")


def _show_recent(env: Environment, task_id: str, store: Any, limit: int = 5) -> None:
    """The last few actions, so the person taking over knows where the task stands."""
    from normalize.cli.describe import journal_events, recent_actions

    for line in recent_actions(journal_events(store.tail(task_id, 200)), limit):
        env.stderr.write(line + "\n")
    env.stderr.write("  type commands (e.g. `view .`, `run pytest`), `done` to finish\n")


def _ask_pending(env: Environment, task: Any) -> Any:
    from normalize.engine import Reply

    read = line_reader(env)
    pending = task.pending
    if pending.kind == "approval":
        reply = approver(env, lambda: None)(pending.question)
        return Reply(approve=reply in ("yes", "always"))
    text = read(f"{pending.question}\n> ")
    return None if text is None else Reply(answer=text)


def show_task(env: Environment, ref: str, *, json_output: bool, full: bool = False) -> int:
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        # the task's state, not its driver config; the events are streamed, never all held
        task = store.shown(store.load(store.resolve(ref), with_config=False))
    except NormalizeError as exc:
        return fail(env, exc)
    from normalize.redact import inert_obj

    events = store.events(task.id)
    if json_output:
        env.stdout.write(json.dumps({"task": task.to_dict()})[:-1] + ', "events": [')
        for number, event in enumerate(events):
            env.stdout.write((", " if number else "") + json.dumps(inert_obj(event)))
        env.stdout.write("]}\n")
        _warn_store(env, store)
        return 0
    out = env.stdout
    out.write(f"task {task.id}  {task.status.value}\n")
    from normalize.cli.taskinput import shown_goal

    out.write(f"  goal:      {shown_goal(task.goal)}\n  driver:    {task.driver}\n")
    out.write(f"  workspace: {task.workspace}\n")
    if task.workflow:
        out.write(f"  workflow:  {task.workflow}\n")
    out.write(f"  turns:     {task.turn}   actions: {task.actions_run}   "
              f"elapsed: {task.elapsed:.1f}s\n")
    if task.usage.requests:
        u = task.usage
        out.write(f"  tokens:    {u.input_tokens:,} in / {u.output_tokens:,} out   "
                  f"cost: ${u.cost_usd:.4f}\n")
    if task.summary:
        out.write(f"  summary:   {task.summary}\n")
    if task.error:
        out.write(f"  error:     {task.error}\n")
    if task.pending is not None:
        out.write(f"  waiting:   {task.pending.question}\n")
    if task.parent:
        out.write(f"  parent:    {task.parent}\n")
    for line in _children_lines(store, task.children):
        out.write(line)
    out.write("steps:\n")
    from normalize.cli.describe import SHOW_LINES, history, journal_events, step_output

    def output(event: Any) -> list[str]:
        whole = None
        if full and event.cache_id:
            from normalize.cli.render import cache_reader

            whole = cache_reader(lambda: store)(task.id, event.cache_id)
        return step_output(event, full_text=whole, lines=None if full else SHOW_LINES)

    for line in history(journal_events(events), output, net_changes(store, task)):
        out.write(line + "\n")
    _warn_store(env, store)
    return 0


def _children_lines(store: Any, children: list[str]) -> list[str]:
    """`tasks show`'s children: one line each with its status, cost and goal."""
    lines = ["children:\n"] if children else []
    for child_id in children:
        try:
            child = store.shown(store.load(child_id, with_config=False))
        except NormalizeError as exc:
            lines.append(f"  {child_id}  unreadable: {exc}\n")
            continue
        goal = child.goal.splitlines()[0] if child.goal.strip() else ""
        lines.append(f"  {child.id}  {child.status.value:<14} ${child.usage.cost_usd:.4f}  "
                     f"{goal[:60]}\n")
    return lines


def net_changes(store: Any, task: Any) -> dict[str, list[int]] | None:
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


def _warn_store(env: Environment, store: Any) -> None:
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
