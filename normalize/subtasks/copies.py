"""The sweep of isolated copies no task needs any more (`normalize tasks clean`).

A child's copy (`copies/ID/` in the data home) is removed when its parent
collects it, unless the spawn said `--keep`. Some outlive that: best-of-N
attempts (kept for inspection), children of a parent that was removed, or a
copy half made before a crash. A copy goes when its task is gone, or when
its task has ended and so has its parent (nothing will collect or run it
again). It stays when it was asked to be kept, when it is a fork's workspace,
while its task or its parent can still go on (running, stopped, waiting), and
while another process holds its task.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from normalize.errors import NormalizeError
from normalize.store import TaskStore
from normalize.subtasks.spawner import ENDED
from normalize.task import Task


@dataclass(frozen=True)
class Swept:
    """One copy looked at: its task id, whether it went (or would go), and why."""

    task_id: str
    removed: bool
    why: str


def sweep(store: TaskStore, *, dry_run: bool = False) -> list[Swept]:
    """Remove every copy no task needs (only say which, `dry_run`); each copy's verdict."""
    root = store.home / "copies"
    if not root.is_dir():
        return []
    out = []
    for place in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        task = _load(store, place.name)
        why, remove = _verdict(store, task)
        if remove and not dry_run and not _removed(store, place, task):
            why, remove = "its task is running", False
        out.append(Swept(place.name, remove, why))
    return out


def _load(store: TaskStore, task_id: str) -> Task | None:
    try:
        return store.load(task_id, with_config=False)
    except NormalizeError:
        return None


def _verdict(store: TaskStore, task: Task | None) -> tuple[str, bool]:
    """Why a copy goes or stays, and whether it goes."""
    if task is None:
        return "its task is gone", True
    settings = task.child
    if settings is None or settings.key == "fork":
        return "it is a fork's workspace", False
    if settings.keep:
        return "kept (--keep)", False
    if task.status not in ENDED:
        return f"its task is {task.status.value}", False
    parent = _load(store, task.parent) if task.parent else None
    if parent is None:
        return "its task ended and its parent is gone", True
    if parent.status not in ENDED:
        return f"its parent {parent.id} is {parent.status.value} (it collects it on resume)", \
            False
    return f"its task ended {task.status.value} and its parent {parent.status.value}", True


def _removed(store: TaskStore, place: Path, task: Task | None) -> bool:
    """Remove the copy, holding its task's lock (False when another process holds it)."""
    if task is None:
        shutil.rmtree(place, ignore_errors=True)
        return True
    lock = store.lock(task.id)
    try:
        lock.acquire(epoch=task.epoch)
    except NormalizeError:
        return False
    try:
        shutil.rmtree(place, ignore_errors=True)
    finally:
        lock.release()
    return True
