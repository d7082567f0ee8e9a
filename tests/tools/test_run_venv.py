"""`run python` and `run pytest` use the project's own virtual environment, as `test` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FLOW = """[workflow]
name = "which"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "import"
action = "run python -c 'import onlyhere; print(onlyhere.WHERE)'"
[[workflow.steps]]
name = "env"
action = "run python -c 'import os, sys; print(sys.prefix == os.environ[\\"VIRTUAL_ENV\\"])'"
"""


def test_run_python_imports_what_only_the_projects_venv_has(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
                   check=True, timeout=120)
    site = next((project / ".venv").glob("lib/python*/site-packages"))
    (site / "onlyhere.py").write_text('WHERE = "the project\'s .venv"\n')
    (project / "which.toml").write_text(FLOW)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "NORMALIZE_CRASH_AT")}
    env["NORMALIZE_HOME"] = str(normalize_home)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=project,
                              env=env, capture_output=True, text=True, timeout=120, check=False)

    proc = cli("run", "which.toml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = cli("tasks", "show", "last").stdout
    assert "the project's .venv" in shown and "True" in shown, shown
