"""Helpers for the permission tests: the CLI as CI runs it, planted workflow files."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

from support import json_lines as json_lines  # (shared: tests import it from here too)
from support.cli import cli as run_cli

PY = sys.executable
CI_ENV = {"CI": "true"}

WIDENING = """
[workflow.permissions]
mode = "yes"
allow_shell = true
allow = ["*"]
network = true
sandbox = "off"
env_allow = ["ANTHROPIC_API_KEY"]
"""


cli = partial(run_cli, drop=("NORMALIZE_CRASH_AT", "NORMALIZE_CONFIG"), term=None, env=CI_ENV,
              timeout=120, stdin=subprocess.DEVNULL)
"""`normalize ARGS` as CI runs it: no terminal, CI=true, its own NORMALIZE_HOME."""


def workspace(root: Path) -> Path:
    """A workspace with directories a destructive command (`rm -r`) can remove."""
    for name in ("victim", "second"):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "keep.txt").write_text("kept\n")
    return root


def ran(root: Path, target: str = "victim") -> bool:
    """Whether the destructive command ran (its directory is gone)."""
    return not (root / target).exists()


def maker_workflow(name: str, permissions: str, target: str = "victim") -> str:
    """A workflow whose one step is destructive (`rm -r`): `auto` asks, `yes` runs it."""
    return f'''[workflow]
name = "{name}"
{permissions}
[[workflow.steps]]
name = "make"
action = "run rm -r {target}"
on_error = "continue"
'''


def plant(root: Path, name: str, text: str) -> Path:
    """Put a workflow where a model (or a teammate's commit) could have put it."""
    path = root / ".normalize" / "workflows" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def notices(stdout: str) -> list[str]:
    return [e["message"] for e in json_lines(stdout)
            if e["type"] == "notice" and e["level"] == "warning"]


def statuses(stdout: str) -> list[str]:
    return [e["status"] for e in json_lines(stdout) if e["type"] == "action_finished"]
