"""Helpers for the durability tests: the CLI in real subprocesses, workflows with side effects."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

from support import json_lines as json_lines  # (shared: tests import it from here too)
from support import wait_for as poll

PYTHON = sys.executable


def cli_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NORMALIZE_CRASH_AT", "NO_COLOR", "TERM")}
    env.update({"NORMALIZE_HOME": str(home), "PYTHONUNBUFFERED": "1", **(extra or {})})
    return env


def cli(*args: str, cwd: Path, home: Path, crash: str | None = None, input: str | None = None,
        timeout: float = 60, env: dict[str, str] | None = None, prefix: list[str] | None = None,
        **popen: Any) -> subprocess.CompletedProcess[str]:
    """Run `normalize ARGS` to its end; `crash` arms NORMALIZE_CRASH_AT for it."""
    extra = dict(env or {})
    if crash:
        extra["NORMALIZE_CRASH_AT"] = crash
    return subprocess.run([*(prefix or []), PYTHON, "-m", "normalize.cli.app", *args], cwd=cwd,
                          env=cli_env(home, extra), capture_output=True, text=True,
                          timeout=timeout, input=input, **popen)


def spawn(*args: str, cwd: Path, home: Path, **popen: Any) -> subprocess.Popen[str]:
    """Start `normalize ARGS` without waiting."""
    return subprocess.Popen([PYTHON, "-m", "normalize.cli.app", *args], cwd=cwd,
                            env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


wait_for = partial(poll, timeout=30.0, every=0.02)


def only_task(home: Path) -> str:
    ids = sorted(p.name[:-5] for p in (home / "tasks").glob("*.json"))
    assert len(ids) == 1, ids
    return ids[0]


def task_file(home: Path, task_id: str) -> dict[str, Any]:
    """The task's stored state: its file, or the newer record in its checkpoint log."""
    from normalize.store import TaskStore

    return TaskStore(home).state(task_id)


def journal(home: Path, task_id: str) -> list[dict[str, Any]]:
    return json_lines((home / "tasks" / f"{task_id}.jsonl").read_text())


def append_action(word: str, log: str = "log.txt") -> str:
    """A `run` command that appends WORD and a newline to the log (shell-free argv)."""
    code = f"import sys; open('{log}', 'a').write(sys.argv[1] + chr(10))"
    return f'run {PYTHON} -c "{code}" {word}'


def wait_action(flag: str, word: str, log: str = "log.txt") -> str:
    """A `run` command that waits for the file FLAG, then appends WORD to the log."""
    code = (f"import os, sys, time; [time.sleep(0.02) for _ in iter(lambda: "
            f"os.path.exists('{flag}'), True)]; open('{log}', 'a').write(sys.argv[1] + chr(10))")
    return f'run {PYTHON} -c "{code}" {word}'


def steps_workflow(path: Path, steps: list[tuple[str, str]], *, extra: str = "",
                   step_extra: dict[str, str] | None = None) -> Path:
    """A workflow file of named steps; side effects need no approval (mode = "yes")."""
    body = [f'[workflow]\nname = "{path.stem}"\n{extra}\n[workflow.permissions]\nmode = "yes"\n']
    for name, action in steps:
        body.append(f"[[workflow.steps]]\nname = \"{name}\"\naction = '''{action}'''\n"
                    + (step_extra or {}).get(name, ""))
    path.write_text("\n".join(body))
    return path


def log_lines(workspace: Path, log: str = "log.txt") -> list[str]:
    path = workspace / log
    return path.read_text().splitlines() if path.exists() else []
