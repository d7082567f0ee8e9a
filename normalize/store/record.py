"""A run's record kept in object storage: the store of record for a batch's items.

When `NORMALIZE_RECORD` names a store with conditional writes (`s3://…`,
`file://…`; a batch's parent gives it to each item it starts with
`--store URL`), a task's run keeps its record there as well as in the local
data home, which is then the node's scratch:

- taking the task takes its lease in the store (`normalize.store.fenced`) and
  fences its journal's head; the local lock follows the store's epoch;
- every journal line is sent with the next durable one, which returns only
  once the store has it: the intent before a side effect, the result after;
  a store that refuses it (a stale holder) stops the run before the effect;
- every checkpoint (the task's state, and once per run the driver config and
  kept values it names) is made in the store and named by the head.

Lines are kept exactly as the local journal holds them (text), so a journal
rebuilt from the store has the same bytes and the same offsets. The journal
is redacted already (the emitter redacts); the checkpoints and the driver
config are exact, as in the data home, because they are what a resume
executes: they live under `record/`, apart from what the batch publishes for
watchers, and the bucket's policy is what keeps them private (give watchers
read access to `batches/` and `tasks/` only).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from normalize import fsopen
from normalize.errors import StoreError
from normalize.fsutil import private_dirs
from normalize.store.fenced import (
    FencedJournal,
    ObjectLease,
    read_checkpoint,
    read_record,
    record_key,
)
from normalize.store.objects import Objects, open_objects, records
from normalize.store.remote import checked_id

ENV = "NORMALIZE_RECORD"


def record_url(environ: dict[str, str] | None = None) -> str:
    """The store of record this process keeps its runs in ("" for none)."""
    url = (os.environ if environ is None else environ).get(ENV, "")
    return url if url and records(url) else ""


class RunRecord:
    """One holder's record of one task in the store (see the module doc)."""

    def __init__(self, objects: Objects, task_id: str) -> None:
        self.objects = objects
        self.task_id = task_id
        self.lease = ObjectLease(objects, task_id)
        self.journal: FencedJournal | None = None
        self._lines: list[str] = []
        self._sent: set[str] = set()  # the files beside the task already in the store

    @classmethod
    def open(cls, url: str, task_id: str) -> RunRecord:
        return cls(open_objects(url), task_id)

    def take(self, epoch: int) -> int:
        """Take the task at an epoch ≥ `epoch`, fence its head, keep the lease; the epoch."""
        taken = self.lease.acquire(max(1, epoch))
        journal = FencedJournal(self.objects, self.task_id, taken)
        try:
            journal.fence()
        except BaseException:
            self.lease.release()
            raise
        self.journal = journal
        self.lease.keep()
        return taken

    def line(self, line: bytes, durable: bool) -> None:
        """A journal line written locally; a durable one returns once the store has it all."""
        self._lines.append(line.decode().rstrip("\n"))
        if durable:
            self.flush()

    def flush(self) -> None:
        if self._lines and self.journal is not None:
            self.journal.append(self._lines)
            self._lines = []

    def checkpoint(self, state: bytes, beside: Path) -> None:
        """Make the task's `state` its current checkpoint, with the files it names in `beside`."""
        if self.journal is None:
            return
        self.flush()  # the lines the checkpoint's journal offset counts are there first
        for name in _named_files(state):
            if name in self._sent:
                continue
            try:
                data = (beside / name).read_bytes()
            except OSError as exc:
                raise StoreError(f"cannot read {beside / name} to keep it in "
                                 f"{self.objects.url}: {exc.strerror or exc}") from exc
            self.objects.put_if_absent(record_key(self.task_id, f"files/{name}"), data)
            self._sent.add(name)  # (named by its content: one there already is the same)
        self.journal.checkpoint(state)

    def release(self) -> None:
        """Send what is left of the journal (when still the holder) and end the lease.

        Called as the run lets the task go, on every way out: a store that refuses
        or cannot be reached here loses only lines no effect waited for (the
        durable ones are there already), and an unreleased lease lapses by itself.
        """
        with contextlib.suppress(StoreError):  # (a StaleEpochError too)
            if not self.lease.lost.is_set():
                self.flush()
        with contextlib.suppress(StoreError):
            self.lease.release()


def _named_files(state: bytes) -> list[str]:
    """The files beside a task's state that it names: its driver config and kept values."""
    names: list[str] = []
    data = json.loads(state)
    config = data.get("driver_config_file") if isinstance(data, dict) else None
    if isinstance(config, str):
        names.append(config)
    _kept(data, names)
    return [n for n in names if "/" not in n and not n.startswith(".")]


def _kept(obj: object, names: list[str]) -> None:
    if isinstance(obj, dict):
        if len(obj) == 1 and isinstance(obj.get("$kept"), str):
            names.append(str(obj["$kept"]))
            return
        for value in obj.values():
            _kept(value, names)
    elif isinstance(obj, list):
        for value in obj:
            _kept(value, names)


BESIDE = re.compile(r"(?:config|kept)-[0-9a-f]{16}\.json")
"""The files beside a task's state that its record keeps (`TaskStore._config_file`, kept values)."""


def rebuild(objects: Objects, task_id: str, home: Path) -> bool:
    """Write the task's record from the store into the data home `home`, exactly: its current
    checkpoint as its task file, the files it names, its journal (the same bytes as where it
    ran). Whether the store has a record of it. What the store holds is untrusted: the id and
    every file name are checked before they name a path, and each file is placed beneath
    `home` without following a link (`normalize.fsopen`)."""
    task_id = checked_id(task_id, objects.url)
    state = read_checkpoint(objects, task_id)
    _, entries = read_record(objects, task_id)
    if state is None:
        return False
    try:
        private_dirs(home / "tasks" / task_id)
    except OSError as exc:
        raise StoreError(f"cannot make {home / 'tasks'}: {exc.strerror or exc}") from None
    prefix = record_key(task_id, "files/")
    for key in objects.list(prefix):
        name = key[len(prefix):]
        found = objects.get(key) if BESIDE.fullmatch(name) else None
        if found is None:
            raise StoreError(f"{objects.url}/{key}: not a file a task's record keeps (refused)")
        _place(home, f"tasks/{task_id}/{name}", found[0])
    journal = b"".join(str(line).encode() + b"\n" for _, line in entries)
    _place(home, f"tasks/{task_id}.jsonl", journal)
    with_log = home / "tasks" / f"{task_id}.ckpt"  # (older than the checkpoint: it goes)
    with_log.unlink(missing_ok=True)
    _place(home, f"tasks/{task_id}.json", state)
    return True


def _place(home: Path, rel: str, data: bytes) -> None:
    try:
        fsopen.place(home, rel, data, mode=0o600, replace_link=False)
    except OSError as exc:
        raise StoreError(f"cannot write {home / rel}: {exc.strerror or exc}") from None
