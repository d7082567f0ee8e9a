"""How a run ends at the command line: the closing lines and the exit status."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from normalize.cli.console import Environment, Renderer

if TYPE_CHECKING:
    from normalize.engine import RunOutcome
    from normalize.task import Task


def shown_question(task: Task) -> str:
    """The question a task waits on, redacted: the task is exact, what is shown is not."""
    from normalize.redact import Redactor

    question = task.pending.question if task.pending is not None else ""
    return Redactor.for_workspace(task.workspace).redact(question)


def finish(env: Environment, outcome: RunOutcome, renderer: Renderer, json_output: bool) -> int:
    """Close the renderer, say how to go on with the task; the exit status."""
    renderer.close()
    from normalize.task import TaskStatus

    task = outcome.task
    env.task_id = task.id
    if outcome.status is TaskStatus.WAITING and task.pending is not None:
        how = REPLY_FLAGS.get(task.pending.kind, "--answer TEXT")
        if json_output:  # the events carry the question; a person reads this line
            env.stderr.write(f"task {task.id} is waiting: {shown_question(task)}\n")
        target = env.stderr if json_output else env.stdout
        target.write(f"  continue with: normalize resume {task.id} {how}\n")
    elif outcome.status in (TaskStatus.INTERRUPTED, TaskStatus.LIMIT) or (
            outcome.status is TaskStatus.FAILED and task.error):
        env.stderr.write(f"  resume with: normalize resume {task.id}{_limit_hint(task)}\n")
    return int(outcome.exit_status)


REPLY_FLAGS = {"approval": "--answer yes|no", "interrupt": "--answer yes|no",
               "question": "--answer TEXT"}


def _limit_hint(task: Task) -> str:
    """The flag that lifts the limit a task stopped at (`--budget` for a budget, …)."""
    from normalize.task import TaskStatus

    if task.status is TaskStatus.FAILED and (task.error or "").startswith("no API key"):
        return f" once the key is set, or take it over: normalize resume {task.id} --driver user"
    if task.status is not TaskStatus.LIMIT:
        return ""
    reason = f"{task.summary} {task.error or ''}"
    if "budget" in reason:
        return " --budget USD"
    if "max_turns" in reason:
        return f" --max-turns {task.turn + 10}"
    return " --max-turns N (or --budget USD)"


STOPPING = ("normalize: {name}: stopping — the running action is cancelled and the task "
            "saved as interrupted (press again to stop at once)")


def stopping_note(env: Environment, renderer: Renderer | None = None) -> Callable[[str], None]:
    """What the first Ctrl-C says; on its own line, never over the live view's status line
    (printed above the live region, so no dead copy of it is left behind)."""
    from normalize.cli.render import LiveRenderer

    def note(name: str) -> None:
        if isinstance(renderer, LiveRenderer) and renderer.say(STOPPING.format(name=name)):
            return
        clear = "\r\033[2K" if env.stderr_tty else ""
        env.stderr.write(f"{clear}{STOPPING.format(name=name)}\n")
        env.stderr.flush()

    return note
