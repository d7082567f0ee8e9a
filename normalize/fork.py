"""Forking a task: a new task from its state and workspace at a step, the original unchanged.

`resume ID --fork [--rewind STEP]` makes a task whose parent is ID, with
ID's state as saved at STEP (default: its last checkpoint) and its own copy
of the workspace as it was then, written from the shadow store
(`checkpoints/isolate.py`) under `copies/NEW/`. The journal up to that state
is copied too, so the fork resumes exactly as ID would have. Nothing of ID
is written: not its task file, its journal, its workspace or its children.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from normalize.children import ChildSettings
from normalize.errors import UsageError
from normalize.store import TaskStore
from normalize.task import Task, TaskStatus, new_task_id


def fork_task(store: TaskStore, task: Task, step: int | None = None) -> Task:
    """A new task from `task` at step `step` (its last checkpoint when None), in its own copy."""
    from normalize.checkpoints import isolate
    from normalize.checkpoints.changes import TaskChanges

    changes = TaskChanges.open(store, task)
    if step is None:
        target, state = changes.steps[-1], task
    else:
        target = changes.step(step)
        if target.mid_turn or target.state is None:
            raise UsageError(f"step {step} has no task state of its own (it is in the middle "
                             f"of turn {target.turn}); fork at the last step of that turn")
        blob = changes.repo.blobs([target.state])[target.state]
        state = store.decode(task.id, json.loads(blob), source=f"step {step} of task {task.id}")
    fork = Task.from_dict(state.to_dict())
    fork.id, fork.parent, fork.children = new_task_id(), task.id, []
    fork.child = ChildSettings(key="fork", isolated=True, merge="none", base=target.tree,
                               origin=task.workspace)
    if fork.status is TaskStatus.RUNNING:
        fork.status = TaskStatus.INTERRUPTED
    copy = store.home / "copies" / fork.id / Path(task.workspace).name
    isolate.make_copy(changes.repo, target.tree, copy)
    fork.workspace = str(copy)
    store.ensure()
    _copy_journal(store, task.id, fork)
    store.create(fork)
    return fork


def _copy_journal(store: TaskStore, source: str, fork: Task) -> None:
    """The source's journal up to the fork's state, as the fork's own (owner-only)."""
    try:
        with open(store.journal_path(source), "rb") as fh:
            data = fh.read(fork.journal_offset)
    except FileNotFoundError:
        data = b""
    path = store.journal_path(fork.id)
    with open(path, "xb", opener=lambda p, flags: os.open(p, flags, 0o600)) as out:
        out.write(data)
