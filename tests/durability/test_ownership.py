"""One owner per task: the lock, takeover after a kill, and the stale-epoch fence."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from durability_support import (
    append_action,
    cli,
    journal,
    log_lines,
    only_task,
    spawn,
    steps_workflow,
    task_file,
    wait_action,
    wait_for,
)

from normalize.errors import StaleEpochError
from normalize.store import TaskStore
from normalize.task import Task


def started_task(tmp_path: Path, home: Path, steps: list[tuple[str, str]],
                 step_extra: dict[str, str] | None = None) -> str:
    """A task saved just before its first action (the process was killed there)."""
    flow = steps_workflow(tmp_path / "flow.toml", steps, step_extra=step_extra)
    crashed = cli("run", str(flow), cwd=tmp_path, home=home, crash="before_action")
    assert crashed.returncode == -signal.SIGKILL
    return only_task(home)


def test_two_resumes_at_the_same_moment_exactly_one_runs(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    task_id = started_task(tmp_path, normalize_home, [("slow", wait_action("go", "ran"))])
    first = spawn("resume", task_id, cwd=tmp_path, home=normalize_home)
    second = spawn("resume", task_id, cwd=tmp_path, home=normalize_home)
    procs = {first.pid: first, second.pid: second}
    try:
        # the loser fails at once, while the winner still waits for `go`
        loser_pid = None
        deadline = time.monotonic() + 30
        while loser_pid is None and time.monotonic() < deadline:
            loser_pid = next((pid for pid, p in procs.items() if p.poll() is not None), None)
            time.sleep(0.02)
        assert loser_pid is not None, "neither resume gave up"
        loser = procs.pop(loser_pid)
        (winner_pid, winner), = procs.items()
        _, err = loser.communicate()
        assert loser.returncode == 1
        assert f"is running in process {winner_pid}" in err
        assert len(err.strip().splitlines()) == 1  # one clear line, no traceback
        (tmp_path / "go").write_text("")
        _, w_err = winner.communicate(timeout=30)
        assert winner.returncode == 0, w_err
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert log_lines(tmp_path) == ["ran"]
    assert task_file(normalize_home, task_id)["status"] == "done"


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_new_epoch(
        tmp_path: Path, normalize_home: Path) -> None:
    # killed while holding the lock, with `ran` journaled as started but not yet run
    flow = steps_workflow(tmp_path / "flow.toml", [("step", append_action("ran"))],
                          step_extra={"step": 'on_interrupt = "rerun"\n'})
    crashed = cli("run", str(flow), cwd=tmp_path, home=normalize_home, crash="action_started")
    assert crashed.returncode == -signal.SIGKILL
    task_id = only_task(normalize_home)
    tasks = normalize_home / "tasks"
    assert task_file(normalize_home, task_id)["status"] == "running"
    assert json.loads((tasks / f"{task_id}.owner").read_text())["epoch"] == 1
    resumed = cli("resume", task_id, cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    epochs = [e["epoch"] for e in journal(normalize_home, task_id) if e["type"] == "run_started"]
    assert epochs == [1, 2]
    owner = json.loads((tasks / f"{task_id}.owner").read_text())
    assert owner["epoch"] == 2 and task_file(normalize_home, task_id)["epoch"] == 2
    assert log_lines(tmp_path) == ["ran"]


def test_a_writer_whose_epoch_is_stale_is_refused_at_commit(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    flow = steps_workflow(tmp_path / "flow.toml", [
        ("slow", wait_action("go", "slow")), ("after", append_action("after"))])
    old = spawn("run", str(flow), cwd=tmp_path, home=normalize_home)
    tasks = normalize_home / "tasks"
    try:
        wait_for(lambda: any('"action_started"' in p.read_text() for p in tasks.glob("*.jsonl")),
                 what="the slow step started")
        task_id = only_task(normalize_home)
        # the lock is lost while its holder lives (a removed lock file, a network file
        # system): a second process takes the task over with a newer epoch
        (tasks / f"{task_id}.lock").unlink()
        new = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
        assert new.returncode == 1  # the slow step's outcome is unknown to it: it fails
        taken = task_file(normalize_home, task_id)
        assert taken["epoch"] == 2 and taken["status"] == "failed"
        journal_size = (tasks / f"{task_id}.jsonl").stat().st_size
        (tmp_path / "go").write_text("")  # the old owner's step ends; it tries to record it
        out, err = old.communicate(timeout=30)
    finally:
        if old.poll() is None:
            old.kill()
            old.communicate()
    assert old.returncode == 1
    assert "was taken over by process" in err + out and "epoch 2" in err + out
    assert task_file(normalize_home, task_id) == taken  # not one byte written over it
    assert (tasks / f"{task_id}.jsonl").stat().st_size == journal_size
    assert log_lines(tmp_path) == ["slow"]  # and it did not go on to the next step


def test_save_with_a_stale_lock_raises_and_writes_nothing(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = Task.new("g", str(tmp_path), "workflow")
    store.save(task)
    before = store.task_path(task.id).read_bytes()
    lock = store.lock(task.id)
    lock.acquire(epoch=1)
    try:
        owner = store.tasks_dir / f"{task.id}.owner"
        owner.write_text(json.dumps({"pid": os.getpid() + 1, "epoch": 7}))
        task.goal = "changed"
        with pytest.raises(StaleEpochError, match=r"taken over by process \d+ \(epoch 7\)"):
            store.save(task, lock=lock)
        assert store.task_path(task.id).read_bytes() == before
    finally:
        lock.release()


def test_each_owner_gets_a_higher_epoch_even_from_an_old_task_copy(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = Task.new("g", str(tmp_path), "workflow")
    store.save(task)
    first = store.lock(task.id)
    first.acquire(epoch=task.epoch + 1)
    first.release()
    second = store.lock(task.id)
    second.acquire(epoch=task.epoch + 1)  # same stale copy of the task (epoch 0)
    second.release()
    assert (first.epoch, second.epoch) == (1, 2)
