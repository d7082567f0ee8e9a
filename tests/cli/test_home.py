"""`NORMALIZE_HOME` as the person wrote it: a relative one is the directory it names from
where normalize started; one that cannot hold the data is refused in one line naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOW = """[workflow]
name = "writes"
[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "write"
action = '''write hello.txt <<EOF
hello from the task
EOF'''
"""


def normalize(*args: str, cwd: Path, home: str, prefix: tuple[str, ...] = ()
              ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NORMALIZE_HOME": home, "CI": "true"}
    env.pop("NORMALIZE_CONFIG", None)
    return subprocess.run([*prefix, sys.executable, "-m", "normalize.cli.app", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def unprivileged() -> tuple[str, ...]:
    """A command prefix that drops root's power to write anywhere (a user namespace)."""
    if os.geteuid() != 0:
        return ()
    unshare = shutil.which("unshare")
    argv = (unshare or "unshare", "--user", "--map-user=1000", "--map-group=1000")
    if unshare is None or subprocess.run([*argv, "true"], capture_output=True).returncode:
        pytest.skip("running as root without user namespaces: root may write anywhere")
    return argv


@pytest.mark.skipif(shutil.which("git") is None, reason="workspace checkpoints need git")
def test_a_relative_home_keeps_the_workspace_checkpoints_so_diff_shows_the_change(
        tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "flow.toml").write_text(WORKFLOW)
    # started beside the workspace: the home is ./.nh from here, whatever runs in ws/
    ran = normalize("run", "ws/flow.toml", "-w", "ws", "--sandbox", "off", cwd=tmp_path,
                    home=".nh")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (workspace / "hello.txt").read_text() == "hello from the task\n"
    assert (tmp_path / ".nh" / "tasks").is_dir() and not (workspace / ".nh").exists()
    shown = normalize("diff", "last", cwd=tmp_path, home=".nh")
    assert shown.returncode == 0, shown.stderr
    assert "+++ b/hello.txt" in shown.stdout and "+hello from the task" in shown.stdout


def test_a_home_that_is_a_file_is_refused_in_one_line_naming_the_variable(
        tmp_path: Path) -> None:
    (tmp_path / "home-file").write_text("not a directory\n")
    proc = normalize("tasks", cwd=tmp_path, home="home-file")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert "NORMALIZE_HOME=home-file" in first and "is not a directory" in first
    assert "Traceback" not in proc.stderr and "File exists" not in proc.stderr


def test_a_home_that_cannot_be_created_is_refused_in_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    proc = normalize("tasks", cwd=tmp_path, home="locked/home", prefix=unprivileged())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert "NORMALIZE_HOME=locked/home" in first and "is not writable" in first
