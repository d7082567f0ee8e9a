"""Commands run bare: `normalize` alone shows its help (no error), and the Action's module run
by hand says what it is instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "NORMALIZE_OUT"))}
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_normalize_alone_shows_its_help_without_an_error(tmp_path: Path) -> None:
    proc = run("normalize.cli.app", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Usage: normalize [OPTIONS] COMMAND [ARGS]...")
    assert "error" not in proc.stderr and "  agent " in proc.stderr


def test_the_action_module_outside_actions_says_so_in_one_line(tmp_path: Path) -> None:
    proc = run("normalize.cli.action", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "normalize action: NORMALIZE_OUT, GITHUB_ENV, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY not "
        "set: this runs as the step of a GitHub Actions job (action.yml sets them); from a "
        "shell, run `normalize run` or `normalize agent`"]
