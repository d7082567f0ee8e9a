"""The set-up `run`, `agent` and `resume` share: options and renderer, a new task, the run's end.

A command builds its `RunOptions` and renderer with `run_options`; a new task
comes from `start` (the `--output-schema` contract, the limits, its first
lines on stderr); `to_the_end` runs a task at the terminal, closes the
renderer, says how to go on, and offers follow-ups when a person can type them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.approve import approver
from normalize.cli.console import (
    Environment,
    Reader,
    Renderer,
    held,
    line_reader,
    prompt_reader,
)
from normalize.errors import UsageError

if TYPE_CHECKING:
    from normalize.engine import Reply
    from normalize.events import Subscriber
    from normalize.runner import RunOptions
    from normalize.structured import OutputContract
    from normalize.task import Task
    from normalize.telemetry import RunTracing
    from normalize.workflow.spec import WorkflowSpec


def run_options(env: Environment, *, workspace: Path | None, json_output: bool, quiet: bool,
                approve: str | None = None, sandbox: str | None = None,
                network: bool | tuple[str, ...] | None = None, otel: bool = False
                ) -> tuple[RunOptions, Renderer]:
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

    holder: list[RunOptions] = []
    renderer = make_renderer(env, json_output=json_output, quiet=quiet,
                             full_text=cache_reader(lambda: holder[0].store if holder else None))
    interactive = env.stdin_tty and env.stdout_tty and not json_output

    def current() -> Subscriber:  # the renderer showing the run now (a follow-up has its own)
        return next(iter(holder[0].subscribers), renderer) if holder else renderer

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


def tracing(env: Environment, flag: bool) -> RunTracing | None:
    """The run's tracing when `--otel` or an OTLP endpoint asks for it; None otherwise.

    With only the variable set and OpenTelemetry absent, one line says so and
    the task runs untraced; `--otel` then refuses (the person asked for it).
    """
    from normalize.telemetry import sdk_disabled, tracing_wanted

    if not tracing_wanted(flag, env.env):
        if flag and sdk_disabled(env.env):
            env.stderr.write("normalize: warning: --otel: OTEL_SDK_DISABLED=true switches "
                             "OpenTelemetry off; no traces\n")
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


def workspace_root(workspace: Path | None) -> Path:
    """`--workspace` (the current directory by default), resolved; it must be a directory."""
    root = (workspace or Path.cwd()).resolve()
    if not root.is_dir():
        raise UsageError(f"--workspace {root}: not a directory")
    return root


def set_limits(task: Task, *, max_turns: int | None = None, budget: float | None = None) -> None:
    """`--max-turns` (the total) and `--budget`, for the driver the task now runs with only."""
    if max_turns is None and budget is None:
        return
    if max_turns is not None:
        task.limits.max_turns = max_turns
    if budget is not None:
        task.limits.max_cost_usd = budget
    task.limits.driver = task.driver


def set_output_retries(spec: WorkflowSpec, retries: int | None, schema: Path | None) -> None:
    """`--output-retries N` into the workflow's spec; refused where no result has a schema."""
    if retries is None:
        return
    if schema is None and not spec.output_schema:
        raise UsageError(f"--output-retries {retries}: goes with --output-schema (or a workflow "
                         f"with output_schema)")
    spec.output_retries = retries


def contract_for(driver: str, path: Path) -> OutputContract:
    """The `--output-schema` contract, for a workflow a model drives (it gives the result)."""
    from normalize.contract.driver import driver_traits
    from normalize.structured import load_contract

    if not driver_traits(driver).checks_output:
        raise UsageError(f"--output-schema {path}: needs a workflow a model drives "
                         f"(this one's driver is {driver})")
    return load_contract(path)


def start(env: Environment, spec: WorkflowSpec, goal: str, options: RunOptions, *,
          output_schema: Path | None, max_turns: int | None, budget: float | None = None,
          named: bool) -> Task:
    """A new task of `spec`, with its limits; its first lines said (`named`: its id too)."""
    from normalize.cli.sandbox import report_tier
    from normalize.cli.trust import report_ignored
    from normalize.runner import start_task

    if output_schema is not None:
        options.output = contract_for(spec.driver, output_schema)
    task = start_task(spec, goal, options)
    set_limits(task, max_turns=max_turns, budget=budget)
    if named:  # JSON lines or --quiet: no live view names the task in its first line
        env.stderr.write(f"task {task.id}\n")
        env.stderr.flush()
        report_ignored(env, task)  # otherwise the run shows it, as a notice
    report_tier(env, task, options)
    return task


@dataclass(frozen=True)
class Going:
    """How a run goes on at the terminal: `resumed` (with `reply`, an answer it waited for);
    `read` offers follow-up instructions once the task ends (None: not asked); `typed=False`
    reads no lines typed during the run (`normalize run`)."""

    resumed: bool = False
    reply: Reply | None = None
    read: Reader | None = None
    typed: bool = True


def to_the_end(env: Environment, task: Task, options: RunOptions, renderer: Renderer, *,
               json_output: bool, going: Going = Going()) -> int:
    """Run `task` at the terminal, close the renderer, say how to go on; the exit status."""
    from normalize.cli.follow import after_run, run_at_terminal
    from normalize.cli.outcome import finish

    outcome = run_at_terminal(env, task, options, renderer, resumed=going.resumed,
                              reply=going.reply, typed=going.typed)
    code = finish(env, outcome, renderer, json_output)
    return after_run(env, outcome, options, code, going.read)
