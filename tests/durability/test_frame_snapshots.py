"""The workflow driver's frames: a task file written before they were dataclasses still resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from durability_support import cli, task_file

from normalize.drivers.frames import ForEach, Frame, Hop, InFlight, Interrupted, Repeat
from normalize.drivers.workflow import WorkflowDriver
from normalize.task import kept_value
from normalize.workflow.spec import WorkflowSpec

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
    saved = task_file(normalize_home, OLD_ID)["driver_states"]["workflow"]["frames"]
    assert [f["path"] for f in saved] == [  # saved again in today's shape
        [], [[1, "then"]], [[1, "then"], [0, "then"]], [[1, "then"], [0, "then"], [0, "else"]]]
    # the loop's position is in the checkpoint; its items were written once, beside it
    loop = saved[2]["loop"]
    assert (loop["i"], loop["as"]) == (1, "colour") and list(loop["items"]) == ["$kept"]
    kept = normalize_home / "tasks" / OLD_ID / loop["items"]["$kept"]
    assert json.loads(kept.read_text()) == ["red", "blue"]
    second = cli("resume", OLD_ID, "--answer", "no", cwd=tmp_path, home=normalize_home)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (tmp_path / "paint-blue.txt").read_text() == "The user answered: no\n"
    assert "all 3 steps finished" in second.stdout
    assert task_file(normalize_home, OLD_ID)["status"] == "done"


def test_old_and_new_frame_shapes_read_as_the_same_frame() -> None:
    old = {"path": [1, 0, -3], "pc": 2, "self": True, "scope": {"name": "s"},
           "loop": {"items": ["a", "b"], "i": 1, "as": "x"}}
    frame = Frame.from_dict(old)
    assert frame == Frame((Hop(1), Hop(0), Hop(2, "else")), 2, {"name": "s"}, holder=True,
                          loop=ForEach(["a", "b"], 1, "x"))
    plain = json.dumps(frame.to_dict(), default=kept_value)  # as the store encodes it
    assert Frame.from_dict(json.loads(plain)) == frame


def test_a_bad_branch_in_a_snapshot_is_refused() -> None:
    with pytest.raises(ValueError, match="bad frame branch"):
        Frame.from_dict({"path": [[0, "sideways"]], "pc": 0})


def test_the_driver_snapshot_is_json_and_restores_to_the_same_state() -> None:
    spec = WorkflowSpec(name="w", path="w.toml", driver="workflow")
    driver = WorkflowDriver(spec)
    driver.frames.append(Frame((Hop(0),), 1, repeat=Repeat(2, 5)))
    state = json.loads(json.dumps(driver.snapshot()))
    again = WorkflowDriver(spec)
    again.restore(state)
    assert again.frames == driver.frames
    assert again.snapshot() == state


def test_restoring_the_old_state_changes_nothing_but_the_frame_paths() -> None:
    old = json.loads((OLD / f"{OLD_ID}.json").read_text())["driver_states"]["workflow"]
    driver = WorkflowDriver(WorkflowSpec(name="frames", path="frames.toml", driver="workflow"))
    driver.restore(old)
    state = json.loads(json.dumps(driver.snapshot(), default=kept_value))
    for frame in (*old["frames"], *state["frames"]):
        frame.pop("path")
        frame["holder"] = frame.pop("holder", frame.pop("self", False))
    assert state == old  # pending, interrupted, loops, scopes: the same JSON as before


def test_a_fanout_and_an_interruption_round_trip_through_json() -> None:
    spec = WorkflowSpec(name="w", path="w.toml", driver="workflow")
    driver = WorkflowDriver(spec)
    driver.pending = InFlight("fanout", [{"status": "success"}], count=3, items=["a", "b", "c"])
    driver.interrupted = Interrupted({"status": "interrupted", "output": ""}, "run make")
    again = WorkflowDriver(spec)
    again.restore(json.loads(json.dumps(driver.snapshot(), default=kept_value)))
    assert (again.pending, again.interrupted) == (driver.pending, driver.interrupted)


def test_a_loops_checkpoint_holds_its_position_not_its_items(tmp_path: Path) -> None:
    from normalize.store import TaskStore
    from normalize.task import Task

    store = TaskStore(tmp_path, fsync=False)
    spec = WorkflowSpec(name="w", path="w.toml", driver="workflow")
    sizes = {}
    for count in (100, 10_000):
        driver = WorkflowDriver(spec)
        driver.frames.append(Frame((Hop(0),), 0, loop=ForEach([f"item-{i}" for i in range(count)],
                                                          count - 1, "x")))
        task = Task.new("g", str(tmp_path), "workflow")
        task.driver_state = driver.snapshot()
        store.create(task)
        lock = store.lock(task.id)
        lock.acquire(epoch=1)
        try:
            store.save(task, lock=lock)  # the items are written once, beside the task
            sizes[count] = store.save(task, lock=lock, full=False)  # then only named
        finally:
            lock.release()
        again = WorkflowDriver(spec)
        again.restore(TaskStore(tmp_path).load(task.id).driver_state)
        assert again.frames[-1].loop == driver.frames[-1].loop  # the items come back
    assert sizes[10_000] <= sizes[100] * 1.05, sizes  # the same size, whatever the length
