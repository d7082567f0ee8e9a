"""After a task ends at a terminal: follow-up instructions, and lines typed meanwhile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from normalize.cli.console import Environment, Reader, Renderer, SignalCancel
from normalize.cli.outcome import finish, stopping_note
from normalize.task import TaskStatus

if TYPE_CHECKING:
    from normalize.engine import Reply, RunOutcome
    from normalize.runner import RunOptions
    from normalize.task import Task

FOLLOW_UP_PROMPT = "follow-up (an empty line or Ctrl-D leaves) › "
FOLLOWABLE = frozenset({TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.STUCK, TaskStatus.LIMIT})


def follow_ups(env: Environment, outcome: RunOutcome, options: RunOptions, read: Reader, *,
               json_output: bool = False) -> int:
    """After a task ends at a terminal, offer follow-up instructions until an empty line.

    Each line continues the same task (notes, plan, cache kept) in a new run;
    lines typed while the last run worked that its model never read become the
    next instruction without asking. Returns the exit status of the last run.
    """
    from normalize.cli.render import make_renderer
    from normalize.cli.typeahead import report_unsent
    from normalize.runner import follow_up

    code = int(outcome.exit_status)
    while outcome.status in FOLLOWABLE:
        leftover = leftover_lines(options)
        if leftover:
            line: str | None = "\n".join(leftover)
            env.stderr.write(f"normalize: continuing with what you typed: {' / '.join(leftover)}\n")
            env.stderr.flush()
        else:
            line = read(FOLLOW_UP_PROMPT)
        if line is None or not line.strip():
            break
        follow_up(outcome.task, line)
        renderer = make_renderer(env, json_output=json_output, quiet=False)
        options.subscribers = [renderer]
        outcome = run_at_terminal(env, outcome.task, options, renderer, resumed=True)
        code = finish(env, outcome, renderer, json_output)
    report_unsent(env, outcome.task.id, leftover_lines(options))
    return code


def leftover_lines(options: RunOptions) -> list[str]:
    """Lines typed during the last run that reached no turn of the model."""
    inbox = options.services.inbox
    return list(inbox.drain()) if inbox is not None else []


def run_at_terminal(env: Environment, task: Task, options: RunOptions, renderer: Renderer, *,
                    resumed: bool = False, reply: Reply | None = None,
                    typed: bool = True) -> RunOutcome:
    """`run_task` with Ctrl-C wired to the cancel token and, when a model drives the task
    (and `typed`), lines typed at a terminal queued for it; traces that could not be sent are
    said once."""
    from normalize.cli.typeahead import typed_lines
    from normalize.contract.driver import driver_traits
    from normalize.runner import run_task

    queued = typed and driver_traits(task.driver).typed_lines
    with SignalCancel(options.cancel, notify=stopping_note(env, renderer)), \
            typed_lines(env, options, renderer, model=queued):
        outcome = run_task(task, options, resumed=resumed, reply=reply)
    problem = options.tracing.problem() if options.tracing is not None else None
    if problem:  # said once: later runs of this process drop their spans at once
        env.stderr.write(f"normalize: warning: {problem}\n")
        env.stderr.flush()
    return outcome


def after_run(env: Environment, outcome: RunOutcome, options: RunOptions, code: int,
              read: Reader | None) -> int:
    """Offer follow-ups when `read` can ask for them, else report lines nobody read."""
    if read is not None:
        return follow_ups(env, outcome, options, read)
    from normalize.cli.typeahead import report_unsent

    report_unsent(env, outcome.task.id, leftover_lines(options))
    return code
