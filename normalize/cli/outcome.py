"""How a run ends at the command line: the closing lines and the exit status."""

from __future__ import annotations

from typing import Any

from normalize.cli.console import Environment


def shown_question(task: Any) -> str:
    """The question a task waits on, redacted: the task is exact, what is shown is not."""
    from normalize.redact import Redactor

    return Redactor.for_workspace(task.workspace).redact(task.pending.question)


def finish(env: Environment, outcome: Any, renderer: Any, json_output: bool) -> int:
    """Close the renderer, say how to go on with the task; the exit status."""
    close = getattr(renderer, "close", None)
    if close is not None:
        close()
    task = outcome.task
    env.task_id = task.id
    if outcome.status.value == "waiting" and task.pending is not None:
        how = REPLY_FLAGS.get(task.pending.kind, "--answer TEXT")
        if json_output:  # the events carry the question; a person reads this line
            env.stderr.write(f"task {task.id} is waiting: {shown_question(task)}\n")
        target = env.stderr if json_output else env.stdout
        target.write(f"  continue with: normalize resume {task.id} {how}\n")
    elif outcome.status.value in ("interrupted", "limit_reached") or (
            outcome.status.value == "failed" and task.error):
        env.stderr.write(f"  resume with: normalize resume {task.id}{_limit_hint(task)}\n")
    return int(outcome.exit_status)


REPLY_FLAGS = {"approval": "--answer yes|no", "interrupt": "--answer yes|no",
               "question": "--answer TEXT"}


def _limit_hint(task: Any) -> str:
    """The flag that lifts the limit a task stopped at (`--budget` for a budget, …)."""
    if task.status.value != "limit_reached":
        return ""
    reason = f"{task.summary} {task.error or ''}"
    if "budget" in reason:
        return " --budget USD"
    if "max_turns" in reason:
        return f" --max-turns {task.turn + 10}"
    return " --max-turns N (or --budget USD)"


STOPPING = ("normalize: {name}: stopping — the running action is cancelled and the task "
            "saved as interrupted (press again to stop at once)")


def stopping_note(env: Environment, renderer: Any = None) -> Any:
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
