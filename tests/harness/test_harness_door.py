"""A harness's CLI is found by normalize's trusted rule: a `claude` the model planted in the
workspace (`node_modules/.bin`, first on PATH) never runs, not even for `--version`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from normalize.programs import SYSTEM_DIRS

PLANTED = f"""#!{sys.executable}
import pathlib
pathlib.Path({{marker!r}}).write_text("planted claude ran")
print("2.1.0 (Claude Code)")
"""


def test_a_claude_planted_in_the_workspace_never_runs(tmp_path: Path) -> None:
    if any(os.access(os.path.join(d, "claude"), os.X_OK) for d in SYSTEM_DIRS):
        pytest.skip("a claude is installed in a system directory: it would be the one run")
    ws = tmp_path / "ws"
    planted = ws / "node_modules" / ".bin"
    planted.mkdir(parents=True)
    marker = ws / "planted-ran"
    (planted / "claude").write_text(PLANTED.format(marker=str(marker)))
    (planted / "claude").chmod(0o755)
    env = {**os.environ, "CI": "true", "ANTHROPIC_API_KEY": "sk-ant-test-key",
           "PATH": os.pathsep.join([str(planted), *SYSTEM_DIRS])}
    env.pop("NORMALIZE_CLAUDE_BIN", None)
    proc = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--harness",
                           "claude", "--approve", "auto", "fix it"], cwd=ws, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)
    assert not marker.exists(), "the claude planted in the workspace ran"
    assert proc.returncode == 2, proc.stdout + proc.stderr  # refused before a task, one line
    assert "--harness claude: claude is not installed" in proc.stderr
    assert "outside the workspace" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
