"""Publishing a batch to a store at a URL, and pulling it back to watch it from anywhere.

The parent publishes the manifest when it starts, each item's progress when
it changes, each collected item's task, journal and diff, and its own task
at the end (see `normalize.store.remote`), each redacted on its way out (with
the redactor of the workspace it came from: its `.env*` values too); the
exact files stay in the data home. `pull_batch` brings them into a scratch
data home, where the ordinary code reads them, taking only the keys and ids
the layout allows.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from normalize.batch.manifest import BatchFiles, Progress
from normalize.errors import NormalizeError, TaskNotFoundError
from normalize.redact import REDACTED, Redactor
from normalize.store import TaskStore
from normalize.store.remote import ID, RemoteStore, checked_id
from normalize.task import Task

DIFFS = "diffs"  # under batches/BATCH/: ITEM.diff, each item's net change


class Publisher:
    """Copies a batch's files from its data home to its store's URL."""

    def __init__(self, url: str, store: TaskStore, batch: str, origin: str = "",
                 given: tuple[str, ...] = ()) -> None:
        self.given = frozenset(given)  # the --var values: secret wherever they show up
        self.remote = RemoteStore(url, _redactor(origin, self.given))
        self.store = store
        self.batch = batch
        self.files = BatchFiles(store.home, batch)

    def _put(self, local: Path, redactor: Redactor | None = None) -> None:
        if local.is_file():
            self.remote.put(str(local.relative_to(self.store.home)), local.read_bytes(),
                            redactor)

    def manifest(self) -> None:
        """The manifest, each `--var` value shown as `[REDACTED]` (a watcher needs the names)."""
        data = json.loads(self.files.manifest_path.read_bytes())
        data["variables"] = dict.fromkeys(data.get("variables") or {}, REDACTED)
        self.remote.put(str(self.files.manifest_path.relative_to(self.store.home)),
                        json.dumps(data, sort_keys=True).encode())

    def progress(self, progress: Progress) -> None:
        self._put(self.files.dir / "items" / f"{progress.position:05d}.json")

    def task(self, task_id: str, workspace: str = "") -> None:
        """The task's file, its newer checkpoint records and its journal."""
        redactor = _redactor(workspace, self.given) if workspace else None
        for path in (self.store.task_path(task_id), self.store.log_path(task_id),
                     self.store.journal_path(task_id)):
            self._put(path, redactor)

    def item(self, task_id: str) -> None:
        """A collected item: its task and its diff."""
        try:
            task = self.store.load(task_id, with_config=False)
        except TaskNotFoundError:
            self.task(task_id)
            return
        self.task(task_id, task.workspace)
        patch = patch_of(self.store, task)
        if patch:
            self.remote.put(f"batches/{self.batch}/{DIFFS}/{task_id}.diff", patch.encode(),
                            _redactor(task.workspace, self.given))


@functools.lru_cache(maxsize=64)
def _redactor(workspace: str, given: frozenset[str]) -> Redactor:
    """A workspace's redactor (its `.env*` values too) that also knows the batch's `--var`
    values (those of 8 characters or more), found once per workspace."""
    found = Redactor.for_workspace(workspace) if workspace else Redactor()
    return Redactor(found.values | given)


def patch_of(store: TaskStore, task: Task) -> str:
    """The task's net change as a readable patch (empty without checkpoints)."""
    from normalize.checkpoints.changes import TaskChanges, readable_patch

    try:
        return readable_patch(TaskChanges.open(store, task).patch(None))
    except NormalizeError:
        return ""


def pull_batch(url: str, ref: str, home: Path) -> str:
    """Pull the batch `ref` (an id or a unique prefix) from `url` into `home`; its id."""
    remote = RemoteStore(url)
    names = {name.split("/")[1] for name in remote.listing("batches")
             if name.count("/") >= 2}
    matches = sorted(n for n in names if n.startswith(ref) and ID.fullmatch(n))
    if len(matches) != 1:
        why = "no batch matches" if not matches else "more than one batch matches"
        raise TaskNotFoundError(f"{why} {ref!r} in {url}")
    batch = matches[0]
    remote.pull(f"batches/{batch}", home)
    files = BatchFiles(home, batch)
    ids = [batch] + [checked_id(files.progress(n).task_id, f"{url}: batch {batch}")
                     for n in range(len(files.manifest().items))]
    for task_id in ids:
        for suffix in (".json", ".ckpt", ".jsonl"):
            remote.fetch(f"tasks/{task_id}{suffix}", home)
    return batch


def published_diff(home: Path, batch: str, task_id: str) -> str | None:
    """An item's diff as its parent published it (None: it changed nothing, or is not done)."""
    try:
        return (home / "batches" / batch / DIFFS / f"{task_id}.diff").read_text()
    except OSError:
        return None
