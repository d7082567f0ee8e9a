"""The `tasks` table: the last changed first under UPDATED, whole goals in a pipe, a workspace
filter, and removing every task in a status at once."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from support.cli import cli as run_cli

from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

cli = partial(run_cli, drop=("NORMALIZE_CRASH_AT", "COLUMNS"))  # the width is the table's own

LONG_GOAL = "rename every helper in the parser module and keep the public names as aliases " \
            "so that callers outside the package do not break, then run the tests"


def save(store: TaskStore, task: Task) -> None:
    """Save, then let the clock pass a millisecond (the index's resolution): no ties."""
    store.save(task)
    mark = time.time()
    while time.time() < mark + 0.002:
        pass


def ids(listing: str) -> list[str]:
    return [line.split()[0] for line in listing.splitlines()[1:] if line[:1].isalnum()]


def test_the_table_lists_the_last_changed_first_with_whole_goals(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    store = TaskStore(home, fsync=False)
    old = Task(id="aaaa0001", goal=LONG_GOAL, workspace=str(ws), driver="llm")
    new = Task(id="bbbb0002", goal="newer", workspace=str(ws), driver="llm")
    save(store, old)
    save(store, new)
    old.status = TaskStatus.INTERRUPTED
    save(store, old)  # created first, changed last
    done = cli("tasks", home=home)
    assert done.returncode == 0, done.stderr
    assert ids(done.stdout) == ["aaaa0001", "bbbb0002"]
    assert LONG_GOAL in done.stdout  # a pipe's reader gets the goal whole


def test_the_workspace_filter_and_removing_every_interrupted_task(tmp_path: Path) -> None:
    home, here, there = tmp_path / "home", tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    store = TaskStore(home, fsync=False)
    for task_id, ws, status in (("c0000001", here, TaskStatus.INTERRUPTED),
                                ("c0000002", here, TaskStatus.DONE),
                                ("c0000003", there, TaskStatus.INTERRUPTED),
                                ("c0000004", here, TaskStatus.INTERRUPTED)):
        save(store, Task(id=task_id, goal="g", workspace=str(ws), driver="llm", status=status))
    assert ids(cli("tasks", "-w", ".", home=home, cwd=here).stdout) == [
        "c0000004", "c0000002", "c0000001"]
    assert ids(cli("tasks", "--workspace", str(there), home=home).stdout) == ["c0000003"]

    removed = cli("tasks", "rm", "--status", "interrupted", "-w", str(here), home=home)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines() == ["removed task c0000004", "removed task c0000001",
                                           "2 interrupted tasks removed"]
    assert ids(cli("tasks", home=home).stdout) == ["c0000003", "c0000002"]
    everywhere = cli("tasks", "rm", "--status", "interrupted", home=home)
    assert everywhere.stdout.splitlines()[-1] == "1 interrupted task removed"

    bad = cli("tasks", "rm", "--status", "broken", home=home)
    assert bad.returncode == 2 and "--status broken: not a status" in bad.stderr
    neither = cli("tasks", "rm", home=home)
    assert neither.returncode == 2 and "give a TASK or --status STATUS" in neither.stderr
