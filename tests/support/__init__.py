"""What tests share: the small helpers every folder wrote again.

Here: JSON lines, waiting for a condition, processes found by a token. In
`support.cli`: the one way a test starts the command line (`cli`). In
`support.git`: git as a test's author, and a committed workspace. `tests/` is
the root tests import from (pytest puts it on `sys.path`: the root
`conftest.py` lives there), so any test says `from support.cli import cli`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def json_lines(text: str) -> list[dict[str, Any]]:
    """Each non-blank line of `text`, decoded as a JSON object."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "", *,
             every: float = 0.05) -> None:
    """Poll `predicate` every `every` s until it holds; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"not reached in {timeout:g} s: {what}")


def alive_with(token: str, *, zombies: bool = False) -> list[int]:
    """Host pids whose command line holds `token` (a sandboxed program sees only its own
    namespace's); a zombie counts only with `zombies` (it has run, its parent not reaped it)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = "" if zombies else \
                Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in cmdline and state != "Z":
            found.append(int(name))
    return found
