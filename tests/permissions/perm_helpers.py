"""Helpers for the permission tests: the CLI as CI runs it, planted workflow files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def cli(*args: str, cwd: Path, home: Path, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """`normalize ARGS` as CI runs it: no terminal, CI=true, its own NORMALIZE_HOME."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NORMALIZE_CRASH_AT", "NORMALIZE_CONFIG")}
    env.update({"NORMALIZE_HOME": str(home), **CI_ENV})
    return subprocess.run([PY, "-m", "normalize.cli.app", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


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
