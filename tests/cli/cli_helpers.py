"""Helpers for the CLI tests: consoles that render into strings, events through a real emit."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from normalize.events import BaseEvent, Emitter

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def lines(text: str) -> list[str]:
    """The text's lines with trailing spaces removed (Rich pads some renderables)."""
    return [line.rstrip() for line in text.splitlines()]


def make_console(*, terminal: bool, width: int = 80) -> Console:
    """A Console writing to a StringIO at a fixed width, time frozen, env ignored."""
    return Console(file=io.StringIO(), width=width, height=40, force_terminal=terminal,
                   color_system="standard" if terminal else None, legacy_windows=False,
                   get_time=lambda: 0.0, _environ={})


def output(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def render(renderable: Any, width: int = 80) -> str:
    """What `renderable` looks like as plain text."""
    console = make_console(terminal=False, width=width)
    console.print(renderable)
    return output(console)


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def emit_all(emitter: Emitter, *events: BaseEvent) -> None:
    for event in events:
        emitter.emit(event)


NORMALIZE = [sys.executable, "-m", "normalize.cli.app"]

DEMO = '''[workflow]
name = "demo"
description = "Look at calc.py and keep a note"

[[workflow.steps]]
name = "look"
action = "view calc.py"

[[workflow.steps]]
name = "remember"
action = "note calc.py is small"
'''

ASKING = '''[workflow]
name = "asking"

[[workflow.steps]]
name = "question"
action = "ask Which Python version should I target?"
'''


def workspace(root: Path) -> Path:
    """A tiny project with calc.py and two workflows (demo.toml, asking.toml)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "demo.toml").write_text(DEMO)
    (root / "asking.toml").write_text(ASKING)
    return root


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a `normalize` subprocess (NORMALIZE_HOME comes from the fixture)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR",
                                                            "COLUMNS", "LINES", "TERM")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "80", **extra})
    return env


def run_in_pty(argv: list[str], env: dict[str, str], cwd: Path,
               timeout: float = 60.0) -> tuple[int, str, str]:
    """Run `argv` with stdout on a pseudo-terminal (stdin from /dev/null): status, out, err."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, env=env, cwd=cwd)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None and not ready:
            break
    os.close(master)
    err = ""
    if proc.stderr is not None:
        err = proc.stderr.read().decode()
        proc.stderr.close()
    status = proc.wait(timeout=timeout)
    return status, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n"), err
