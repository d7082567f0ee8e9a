"""Forking a task: a new task from its state and workspace at a step, the original unchanged.

`resume ID --fork [--rewind STEP]` makes a task whose parent is ID, with
ID's state as saved at STEP (default: its last checkpoint) and its own copy
of the workspace as it was then, written from the shadow store
(`checkpoints/isolate.py`) under `copies/NEW/`. The journal up to that state
is copied too, so the fork resumes exactly as ID would have. Nothing of ID
is written: not its task file, its journal, its workspace or its children.

With `--in-place` the fork works in ID's workspace itself: with `--rewind
STEP` the files ID changed are first put back as they were at STEP (refused
as a whole, changing nothing, when a person changed one since), as a rewind
would; ID's task file, journal and children are still not written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.errors import UsageError
from normalize.store import TaskStore
from normalize.subtasks.children import ChildSettings
from normalize.task import Task, TaskStatus, new_task_id

if TYPE_CHECKING:
    from normalize.checkpoints.changes import TaskChanges
    from normalize.checkpoints.record import WorkspaceStep


def fork_task(store: TaskStore, task: Task, step: int | None = None, *,
              in_place: bool = False) -> Task:
    """A new task from `task` at step `step` (its last checkpoint when None), in its own copy
    (or, `in_place`, in the task's workspace, its files put back to that step)."""
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
    fork.child = ChildSettings(key="fork", isolated=not in_place, merge="none",
                               base=target.tree, origin=task.workspace)
    if fork.status is TaskStatus.RUNNING:
        fork.status = TaskStatus.INTERRUPTED
    if in_place:
        fork.workspace = task.workspace
        if step is not None:
            _restore_in_place(store, changes, target)
    else:
        copy = store.home / "copies" / fork.id / Path(task.workspace).name
        isolate.make_copy(changes.repo, target.tree, copy)
        fork.workspace = str(copy)
    store.ensure()
    _copy_journal(store, task.id, fork)
    store.create(fork)
    return fork


def _restore_in_place(store: TaskStore, changes: TaskChanges, target: WorkspaceStep) -> None:
    """Put the files the task changed back as at `target`, all or none (the task locked)."""
    from normalize.checkpoints.changes import plan_restore
    from normalize.checkpoints.restore import apply_restore
    from normalize.checkpoints.shadow import CheckpointError, shown

    task = changes.task
    todo, refused, _ = plan_restore(changes, target, force=False)
    if refused:
        raise UsageError(f"cannot fork task {task.id} in place at step {target.number}: "
                         f"changed since the task last touched it: "
                         f"{', '.join(map(shown, refused))} (fork into a copy instead)")
    lock = store.lock(task.id)  # not while it runs
    lock.acquire(epoch=task.epoch)
    try:
        _, blocked = apply_restore(changes.repo, todo)
    finally:
        lock.release()
    if blocked:
        raise CheckpointError(f"cannot fork task {task.id} in place: " + "; ".join(
            f"refused {shown(p)}: {why}" for p, why in blocked.items()))


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
