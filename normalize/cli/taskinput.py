"""Where `normalize agent` reads its task from: the argument, stdin (`-`) or `--task-file`."""

from __future__ import annotations

from pathlib import Path

from normalize.cli.console import Environment
from normalize.errors import UsageError

SHOWN = 200  # characters of a long goal shown in `tasks show` (the task keeps it whole)


def task_text(env: Environment, task: str, task_file: Path | None) -> str:
    """The task's text, whole: from the argument, stdin when it is `-`, or from FILE."""
    if task_file is not None:
        if task:
            raise UsageError("give the task as an argument or with --task-file, not both")
        return _from_file(task_file)
    if task == "-":
        text = env.stdin.read()
        if not text.strip():
            raise UsageError("TASK `-`: stdin was empty: say what the agent should do")
        return text.strip("\n")
    return task


def _from_file(path: Path) -> str:
    """The file's text, or one line saying why it cannot be the task."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--task-file {path}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"--task-file {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise UsageError(f"--task-file {path}: empty: say what the agent should do")
    return text.strip("\n")


def shown_goal(goal: str, width: int = SHOWN) -> str:
    """A goal for a view: its first line cut to `width`, saying how much more the task holds."""
    lines = goal.strip().splitlines() or [""]
    first = lines[0]
    if len(lines) == 1 and len(first) <= width:
        return first
    cut = first if len(first) <= width else first[: width - 1] + "…"
    return f"{cut}  ({len(goal):,} characters, {len(lines)} lines; --json has it whole)"
