"""A batch as data: its manifest (what to run over which items, with which limits) and,
per item, its progress (attempts, the node it ran on, whether its budget is reserved).

Both live in the store beside the tasks, under `batches/BATCH/`: `manifest.json`
(written once, before any item is submitted) and `items/NNNNN.json` (written by
the batch's parent as each item moves on). An item's own state is its task's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from normalize.errors import NormalizeError, TaskNotFoundError, UsageError
from normalize.fsutil import private_dirs
from normalize.homes import batch_item_id, batch_manifest
from normalize.serial import Record
from normalize.store import TaskStore
from normalize.store.ownership import atomic_write_bytes

OnItemError = Literal["continue", "stop"]
Stage = Literal["untouched", "submitted", "collected"]
WORKSPACE_KINDS = ("dir:", "clone:", "copy")


def item_id(batch: str, position: int) -> str:
    """An item's task id: the same for the same batch and position, on every run."""
    return batch_item_id(batch, position)


def check_workspace(template: str, where: str) -> None:
    """A workspace template names `dir:PATH`, `clone:REPO`, or `copy` (or nothing)."""
    if template and not template.startswith(WORKSPACE_KINDS):
        raise UsageError(f"{where}: workspace {template!r} must be dir:PATH, clone:REPO or "
                         "copy (an isolated copy of the current workspace)")


@dataclass
class BatchLimits(Record):
    """Limits across a batch."""

    concurrency: int = 4
    budget: float | None = None  # USD for the whole batch
    item_budget: float | None = None  # USD per item
    max_attempts: int = 3  # runs of one item (a worker or process that died counts)
    on_item_error: OnItemError = "continue"
    cpus: float = 1.0  # what one item asks a cluster for (Ray's scheduling request)
    memory_mb: int | None = None


@dataclass
class Manifest(Record):
    """What a batch runs: fixed when it starts."""

    batch: str
    workflow: str  # the workflow file as found
    workflow_hash: str
    goal: str
    origin: str  # the directory it was started in
    items: list[dict[str, Any]]
    workspace: str = ""  # per item: dir:PATH, clone:REPO, copy or "" (copy)
    executor: str = "local"
    address: str = ""  # the Ray cluster
    flags: tuple[str, ...] = ()  # what every item's run is given (--approve, --sandbox, …)
    variables: dict[str, str] = field(default_factory=dict)  # --var
    model: str | None = None
    limits: BatchLimits = field(default_factory=BatchLimits)
    base: str = ""  # isolated copies: the tree of the origin they are made from
    store: str = ""  # the URL the batch is published to (empty: none)
    output_schema: str = ""  # the schema each item's result must meet (--output-schema)


@dataclass
class Progress(Record):
    """Where one item stands, as its batch's parent sees it."""

    position: int
    task_id: str
    stage: Stage = "untouched"
    attempts: int = 0
    node: str = ""  # where its last attempt ran
    reserved: float = 0.0  # the budget set aside for it (USD)
    note: str = ""  # why it stopped short (its last attempt's exit, a clone that failed)


class BatchFiles:
    """A batch's files under a data home (`batches/BATCH/`)."""

    def __init__(self, home: Path, batch: str, *, fsync: bool = True) -> None:
        self.home = home
        self.batch = batch
        self.manifest_path = batch_manifest(home, batch)
        self.dir = self.manifest_path.parent
        self.fsync = fsync

    @property
    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def write_manifest(self, manifest: Manifest) -> None:
        private_dirs(self.dir / "items")
        self._write(self.manifest_path, manifest.to_dict())

    def manifest(self) -> Manifest:
        try:
            data = json.loads(self.manifest_path.read_bytes())
        except FileNotFoundError:
            raise TaskNotFoundError(f"no batch {self.batch} in {self.home}") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"batch {self.batch}: its manifest cannot be read: {exc}") from None
        return Manifest.from_dict(data)

    def progress(self, position: int) -> Progress:
        path = self._item(position)
        try:
            return Progress.from_dict(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return Progress(position, item_id(self.batch, position))

    def all_progress(self, count: int, known: Mapping[int, Progress] | None = None
                     ) -> list[Progress]:
        """Every item's progress, in order: the directory is listed once and only the
        files in it are read (a batch of 100,000 items, most untouched, starts fast), but
        for the items `known` already (the batch's index: see `normalize.batch.index`)."""
        known = known or {}
        try:
            present = set(os.listdir(self.dir / "items"))
        except OSError:
            present = set()
        return [known[n] if n in known else self.progress(n) if f"{n:05d}.json" in present
                else Progress(n, item_id(self.batch, n)) for n in range(count)]

    def save(self, progress: Progress) -> None:
        self._write(self._item(progress.position), progress.to_dict())

    def _item(self, position: int) -> Path:
        return self.dir / "items" / f"{position:05d}.json"

    def _write(self, path: Path, data: Any) -> None:
        atomic_write_bytes(path, json.dumps(data, sort_keys=True).encode(), fsync=self.fsync)


def item_status(store: TaskStore, progress: Progress) -> str:
    """An item's status: its task's, or `untouched` / `failed` (it never got a task)."""
    if progress.stage == "untouched":
        return "untouched"
    try:
        return str(store.state(progress.task_id).get("status", "pending"))
    except NormalizeError:
        return "failed"
    except (OSError, ValueError):
        return "failed"
