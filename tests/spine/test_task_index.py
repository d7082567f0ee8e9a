"""The task index: sealed, a listing trusts it at one stat of `tasks/`; stale, it is rebuilt."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from normalize.store import TaskStore, index
from normalize.task import Task


def make(store: TaskStore, task_id: str, goal: str) -> Task:
    task = Task(id=task_id, goal=goal, workspace="/tmp", driver="workflow")
    store.save(task)
    return task


def settle(store: TaskStore) -> None:
    """`tasks/` as a store in daily use leaves it: unchanged for an hour."""
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(store.tasks_dir, ns=(hour_ago, hour_ago))


def damage_in_place(path: Path) -> None:
    """Overwrite a file without renaming it: its directory does not change."""
    with path.open("r+b") as fh:
        fh.write(b"{damaged")
        fh.truncate()


def last_line(store: TaskStore) -> object:
    return json.loads((store.tasks_dir / index.NAME).read_bytes().splitlines()[-1])


def sealed_for(store: TaskStore) -> dict[str, object]:
    """The seal's directory stamp and the ids it says to read (it must be the last line)."""
    seal = last_line(store)
    assert isinstance(seal, dict), seal
    return {"dir": seal["dir"], "read": seal["read"]}


def goals(store: TaskStore) -> list[str]:
    listed, problems = TaskStore(store.home).summaries()
    assert not problems, problems
    return sorted(s["goal"] for s in listed)


def test_a_sealed_index_is_trusted_without_looking_at_a_task_file(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    for number in range(3):
        make(store, f"aaaa000{number}", f"goal {number}")
    settle(store)
    assert goals(store) == ["goal 0", "goal 1", "goal 2"]  # every file checked, then sealed
    assert isinstance(last_line(store), dict)
    damage_in_place(store.task_path("aaaa0001"))
    # one stat of tasks/: the damaged file is neither opened nor stat'ed
    assert goals(store) == ["goal 0", "goal 1", "goal 2"]
    make(store, "aaaa0003", "goal 3")  # tasks/ changed: every file is checked again
    listed, problems = TaskStore(tmp_path).summaries()
    assert sorted(s["goal"] for s in listed) == ["goal 0", "goal 2", "goal 3"]
    assert [p.path.name for p in problems] == ["aaaa0001.json"]


def test_a_missing_index_is_rebuilt_by_the_listing_and_then_trusted(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    for number in range(3):
        make(store, f"bbbb000{number}", f"goal {number}")
    (store.tasks_dir / index.NAME).unlink()
    store.task_path("bbbb0002").unlink()  # removed by hand: the index never heard of it
    settle(store)
    assert goals(store) == ["goal 0", "goal 1"]  # read from the files, and indexed
    lines = (store.tasks_dir / index.NAME).read_bytes().splitlines()
    assert sorted(json.loads(line)[0] for line in lines) == ["bbbb0000", "bbbb0001"]
    settle(store)  # (creating the index changed tasks/)
    assert goals(store) == ["goal 0", "goal 1"]  # every file checked against it: sealed
    assert sealed_for(store) == {"dir": store.tasks_dir.stat().st_mtime_ns, "read": []}
    damage_in_place(store.task_path("bbbb0000"))
    assert goals(store) == ["goal 0", "goal 1"]  # now from the index alone


def test_a_task_removed_by_hand_leaves_a_sealed_listing(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    make(store, "cccc0001", "kept")
    make(store, "cccc0002", "removed by hand")
    settle(store)
    assert goals(store) == ["kept", "removed by hand"]  # sealed
    store.task_path("cccc0002").unlink()
    settle(store)
    assert goals(store) == ["kept"]
    assert sealed_for(store) == {"dir": store.tasks_dir.stat().st_mtime_ns, "read": []}
    assert goals(store) == ["kept"]  # the seal came after the line that removes it


def test_a_task_with_a_checkpoint_log_is_read_from_its_file_under_a_seal(
        tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = make(store, "dddd0001", "running")
    make(store, "dddd0002", "done")
    lock = store.lock(task.id)
    lock.acquire(epoch=1)
    try:
        store.save(task, lock=lock, full=False)  # the run's first checkpoint: the file
        task.turn = 1
        store.save(task, lock=lock, full=False)  # then records appended to its log
        settle(store)
        listed, _ = TaskStore(tmp_path).summaries()
        assert {s["id"]: s["turn"] for s in listed} == {"dddd0001": 1, "dddd0002": 0}
        seal = last_line(store)
        assert isinstance(seal, dict) and seal["read"] == ["dddd0001"]
        task.turn = 2
        store.save(task, lock=lock, full=False)  # appended: tasks/ does not change
        listed, _ = TaskStore(tmp_path).summaries()
        assert {s["id"]: s["turn"] for s in listed} == {"dddd0001": 2, "dddd0002": 0}
    finally:
        lock.release()


def test_a_store_changed_a_moment_ago_is_not_sealed(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    make(store, "eeee0001", "fresh")
    assert goals(store) == ["fresh"]
    assert isinstance(last_line(store), list)  # a coarse clock could hide the next change


def test_resume_last_takes_the_newest_task_from_the_seal(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    running = make(store, "ffff0001", "running")
    lock = store.lock(running.id)
    lock.acquire(epoch=1)
    try:
        store.save(running, lock=lock, full=False)  # the run's first checkpoint: the file
        store.save(running, lock=lock, full=False)  # then its log
        for number in range(2, 5):
            make(store, f"ffff000{number}", f"done {number}")
        settle(store)
        assert goals(store)  # checked every file, and sealed
        seal = last_line(store)
        assert isinstance(seal, dict) and seal["last"] == "ffff0004"
        # exact, as the running task's state is: a rounded time could outrank a later task
        assert seal["at"] == store.state("ffff0004")["updated_at"] > running.updated_at
        assert TaskStore(tmp_path).resolve("last") == "ffff0004"
        # the seal alone answers: an index line edited in place is not read
        path = store.tasks_dir / index.NAME
        path.write_bytes(path.read_bytes().replace(b'"ffff0004"', b'"ffff000X"', 1))
        os.utime(store.tasks_dir, ns=(seal["dir"], seal["dir"]))
        assert TaskStore(tmp_path).resolve("last") == "ffff0004"
        running.turn = 1
        store.save(running, lock=lock, full=False)  # appended: newer than every other task
        assert TaskStore(tmp_path).resolve("last") == "ffff0001"
    finally:
        lock.release()
