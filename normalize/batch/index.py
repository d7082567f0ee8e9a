"""A batch's index of items: what `batch status`, `collect` and `resume BATCH` show, in one file.

The parent appends one line to `batches/BATCH/index.jsonl` each time an item
comes to rest (collected, or failed before it had a task): its progress
(attempts, node, reservation, note), what its task says (status, turns, cost,
question, summary, error, result, workspace) and its net change's line counts,
the change itself kept beside it in `diffs/ITEM.diff`. Readers take the file in
one pass, the last line of an item winning, and so open neither each item's
task nor git.

Each line carries the stamp (modification time and size) of the item's task
file and checkpoint log when it was written. A line whose stamp no longer
matches (the item was resumed by hand since) is not used; nor is a line torn
by a crash. An item the index does not cover (a parent killed between saving
an item's progress and appending its line, a batch from before the index) is
read from its files as before: the index is a cache, never the record.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.batch.manifest import BatchFiles, Progress
from normalize.errors import NormalizeError
from normalize.serial import Record
from normalize.store import TaskStore
from normalize.task import Task

INDEX = "index.jsonl"
DIFFS = "diffs"  # under batches/BATCH/: ITEM.diff, each item's net change


@dataclass
class IndexEntry(Record):
    """One item at rest, as the index keeps it."""

    position: int
    task_id: str
    status: str
    attempts: int = 0
    node: str = ""
    reserved: float = 0.0
    note: str = ""
    turns: int = 0
    cost_usd: float = 0.0
    added: int = 0
    removed: int = 0
    question: str = ""
    summary: str = ""
    error: str | None = None
    result: Any = None
    workspace: str = ""
    has_task: bool = False
    stamp: list[int] = field(default_factory=list)

    def progress(self) -> Progress:
        """The item's progress as its parent saved it with this line."""
        return Progress(self.position, self.task_id, "collected", self.attempts, self.node,
                        self.reserved, self.note)


def stamp(store: TaskStore, task_id: str) -> list[int]:
    """The task file's and checkpoint log's (mtime_ns, size); (0, -1) for one that is absent."""
    out: list[int] = []
    for path in (store.task_path(task_id), store.log_path(task_id)):
        try:
            info = path.stat()
        except OSError:
            out += [0, -1]
            continue
        out += [info.st_mtime_ns, info.st_size]
    return out


class ItemIndex:
    """The index of one batch in one data home."""

    def __init__(self, store: TaskStore, batch: str) -> None:
        self.store = store
        self.files = BatchFiles(store.home, batch)
        self.path = self.files.dir / INDEX

    def read(self) -> dict[int, IndexEntry]:
        """Each covered item's last line, kept only while its stamp holds (one pass)."""
        try:
            text = self.path.read_bytes()
        except OSError:
            return {}
        found: dict[int, IndexEntry] = {}
        for line in text.splitlines():
            try:
                entry = IndexEntry.from_dict(json.loads(line))
            except (ValueError, TypeError, KeyError, NormalizeError):
                continue  # a line torn by a crash: that item is read from its files
            found[entry.position] = entry
        return {n: e for n, e in found.items() if e.stamp == stamp(self.store, e.task_id)}

    def add(self, progress: Progress, status: str, task: Task | None) -> IndexEntry:
        """Append the item's line (its diff written first); the entry appended."""
        entry = IndexEntry(progress.position, progress.task_id, status, progress.attempts,
                      self._node(progress), progress.reserved, progress.note)
        if task is not None:
            entry.has_task = True
            entry.turns, entry.cost_usd = task.turn, task.usage.cost_usd
            entry.question = task.pending.question if task.pending is not None else ""
            entry.summary, entry.error, entry.result = task.summary, task.error, task.result
            entry.workspace = task.workspace
            entry.added, entry.removed = self._diff(task)
        entry.stamp = stamp(self.store, progress.task_id)
        line = json.dumps(entry.to_dict(), sort_keys=True).encode() + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write: a line is whole or torn, never interleaved
        finally:
            os.close(fd)
        return entry

    def _node(self, progress: Progress) -> str:
        """Where the item ran: what its worker wrote last, else what its parent saw."""
        try:
            return (self.store.tasks_dir / progress.task_id / "node").read_text().strip()[:64]
        except OSError:
            return progress.node

    def _diff(self, task: Task) -> tuple[int, int]:
        """Keep the task's net change beside the index; its lines added and removed."""
        from normalize.batch.publish import patch_of
        from normalize.checkpoints.changes import parse_patch

        patch = patch_of(self.store, task)
        path = self.diff_path(task.id)
        if not patch:
            path.unlink(missing_ok=True)
            return 0, 0
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_text(patch)
        files = parse_patch(patch)
        return sum(f["added"] for f in files), sum(f["removed"] for f in files)

    def diff_path(self, task_id: str) -> Path:
        return self.files.dir / DIFFS / f"{task_id}.diff"

    def diff(self, task_id: str) -> str:
        """The item's change as the index kept it ("" when it changed nothing)."""
        try:
            return self.diff_path(task_id).read_text()
        except OSError:
            return ""
