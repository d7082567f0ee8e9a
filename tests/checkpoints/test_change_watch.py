"""The workspace watch: a side effect's scan just before it is skipped only when nothing changed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from normalize.checkpoints import WorkspaceCheckpoints
from normalize.checkpoints.record import read_steps, task_ref
from normalize.checkpoints.watch import ChangeWatch, fs_type
from normalize.store import TaskStore
from normalize.task import Action, Task


def tree(ws: Path) -> None:
    for rel in ("a.txt", "d/b.txt", "d/e/c.txt", "empty/.keep"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(f"{rel}\n")
    (ws / "empty" / ".keep").unlink()  # an empty directory, which no git listing names


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    tree(ws)
    if fs_type(ws) not in ("ext4", "xfs", "btrfs", "tmpfs", "overlay"):
        pytest.fail(f"the test's tmp is on {fs_type(ws)!r}: the watch needs a local file system")
    return ws


def outside(ws: Path) -> Path:
    made = ws.parent / "outside"
    (made / "deep").mkdir(parents=True)
    (made / "deep" / "x.txt").write_text("x\n")
    return made


CHANGES: dict[str, Callable[[Path], Any]] = {
    "write a nested file": lambda ws: (ws / "d/e/c.txt").write_text("changed\n"),
    "create a file": lambda ws: (ws / "d/new.txt").write_text("new\n"),
    "delete a file": lambda ws: (ws / "d/b.txt").unlink(),
    "rename a file": lambda ws: (ws / "a.txt").rename(ws / "d/a.txt"),
    "chmod a file": lambda ws: (ws / "a.txt").chmod(0o755),
    "a file in an empty directory": lambda ws: (ws / "empty/f.txt").write_text("f\n"),
    "remove a directory": lambda ws: shutil.rmtree(ws / "d"),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_the_watch_sees_each_kind_of_change(ws: Path, change: str) -> None:
    watch = ChangeWatch(ws)
    try:
        assert watch.arm()
        assert not watch.drain()  # nothing yet
        CHANGES[change](ws)
        assert watch.drain()
        assert not watch.drain()  # drained
    finally:
        watch.close()


def test_a_directory_made_or_moved_in_later_is_watched_to_its_depth(ws: Path) -> None:
    watch = ChangeWatch(ws)
    try:
        assert watch.arm()
        (ws / "new" / "deeper").mkdir(parents=True)
        shutil.move(str(outside(ws)), ws / "moved")
        assert watch.drain()  # the new directories are watched from here on
        for rel in ("new/deeper/f.txt", "moved/deep/x.txt"):
            (ws / rel).write_text("later\n")
            assert watch.drain(), rel
    finally:
        watch.close()


def test_git_and_normalize_directories_are_not_watched(ws: Path) -> None:
    (ws / ".git").mkdir()
    watch = ChangeWatch(ws)
    try:
        assert watch.arm()
        (ws / ".git" / "index").write_text("git's\n")
        assert not watch.drain()
    finally:
        watch.close()


def recorder_for(ws: Path, home: Path) -> tuple[WorkspaceCheckpoints, Task, list[int]]:
    """A recorder whose scans are counted."""
    store = TaskStore(home)
    task = Task.new(goal="g", workspace=str(ws), driver="user")
    store.save(task)
    recorder = WorkspaceCheckpoints.for_workspace(ws, home, store.task_path)
    assert recorder is not None
    scans = [0]
    snapshot = recorder.repo.snapshot

    def counted(**kw: Any) -> Any:
        scans[0] += 1
        return snapshot(**kw)

    recorder.repo.snapshot = counted  # type: ignore[method-assign]
    return recorder, task, scans


def step(recorder: WorkspaceCheckpoints, task: Task, key: str, ws: Path, rel: str) -> None:
    action = Action("write", {}, text=f"write {rel}", key=key)
    recorder.before(task, action)
    (ws / rel).write_text(f"by the task at {key}\n")
    recorder.take(task, action)


def test_a_step_after_a_quiet_moment_scans_once_and_a_persons_edit_is_still_not_the_tasks(
        ws: Path, tmp_path: Path) -> None:
    recorder, task, scans = recorder_for(ws, tmp_path / "home")
    try:
        recorder.take(task)  # the run's start
        assert scans == [1]
        step(recorder, task, "0.0", ws, "a.txt")
        assert scans == [2]  # nothing changed between the start and the step: no scan before
        (ws / "d/e/c.txt").write_text("the person's\n")  # between two steps
        step(recorder, task, "1.0", ws, "d/b.txt")
        assert scans == [4]  # the person's edit: scanned before, as without the watch
        steps = read_steps(recorder.repo, task.id)
        assert [sorted(s.files) for s in steps] == [[], ["a.txt"], ["d/b.txt"]]
        assert steps[2].base is not None and steps[2].base != steps[1].tree
        assert recorder.repo.read_ref(task_ref(task.id)) == steps[-1].commit
    finally:
        recorder.close()


def test_without_a_watch_every_side_effect_is_scanned_before(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ChangeWatch, "arm", lambda self: False)  # (a network file system)
    recorder, task, scans = recorder_for(ws, tmp_path / "home")
    try:
        recorder.take(task)
        step(recorder, task, "0.0", ws, "a.txt")
        assert scans == [3]
        assert os.path.exists(ws / "a.txt")
    finally:
        recorder.close()
