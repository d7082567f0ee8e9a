"""`resume last` is this directory's newest task; elsewhere it names the workspace it picked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cli_helpers import NORMALIZE, cli_env, workspace


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NORMALIZE, *args], cwd=cwd, env=cli_env(), capture_output=True,
                          text=True, timeout=60, check=False)


def waiting_task(project: Path) -> str:
    asked = cli(project, "run", "asking.toml")
    assert asked.returncode == 4, asked.stdout + asked.stderr  # waiting for the answer
    found = re.search(r"task ([0-9a-f]{8}) started", asked.stdout)
    assert found, asked.stdout
    return found.group(1)


def test_resume_last_takes_this_directorys_task_not_the_newest_elsewhere(
        tmp_path: Path) -> None:
    mine, other = workspace(tmp_path / "mine"), workspace(tmp_path / "other")
    (mine / "src").mkdir()
    first = waiting_task(mine)
    newest = waiting_task(other)  # newer, in another repository

    nowhere = tmp_path / "elsewhere"
    nowhere.mkdir()
    there = cli(nowhere, "resume", "last", "--answer", "3.11")
    assert there.returncode == 0, there.stdout + there.stderr
    assert there.stdout.startswith(f"task {newest}: the last task, of {other.resolve()} (none "
                                   "is of this directory)\n")

    here = cli(mine / "src", "resume", "last", "--answer", "3.12")
    assert here.returncode == 0, here.stdout + here.stderr
    assert f"task {first} resumed" in here.stdout and newest not in here.stdout
