"""The workflow driver's frames: a task file written before they were dataclasses still resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from durability_support import cli, task_file

OLD = Path(__file__).parents[1] / "fixtures" / "tasks" / "workflow-frames"
OLD_ID = "786c5b7a"


def install_old_task(home: Path, workspace: Path) -> None:
    """The fixture (an `until` › `for_each` › `else` stack waiting on `ask`) in `home`."""
    tasks = home / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    data = json.loads((OLD / f"{OLD_ID}.json").read_text())
    data["workspace"] = str(workspace)
    (tasks / f"{OLD_ID}.json").write_text(json.dumps(data))
    shutil.copytree(OLD / OLD_ID, tasks / OLD_ID)


def test_the_fixture_holds_old_shape_frames() -> None:
    frames = json.loads((OLD / f"{OLD_ID}.json").read_text())["driver_states"]["workflow"]
    paths = [f["path"] for f in frames["frames"]]
    assert paths == [[], [1], [1, 0], [1, 0, -1]]  # -1: the `else` of step 0


def test_a_task_waiting_inside_old_shape_frames_resumes_to_the_end(
        tmp_path: Path, normalize_home: Path) -> None:
    install_old_task(normalize_home, tmp_path)
    first = cli("resume", OLD_ID, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert first.returncode == 4, first.stdout + first.stderr
    assert "Paint it blue?" in first.stdout
    assert (tmp_path / "paint-red.txt").read_text() == "The user answered: yes\n"
    second = cli("resume", OLD_ID, "--answer", "no", cwd=tmp_path, home=normalize_home)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (tmp_path / "paint-blue.txt").read_text() == "The user answered: no\n"
    assert "all 3 steps finished" in second.stdout
    assert task_file(normalize_home, OLD_ID)["status"] == "done"
