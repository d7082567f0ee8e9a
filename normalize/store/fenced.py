"""A task's record in object storage: its lease, its fenced journal, its checkpoints.

Under `record/tasks/ID/` in the store (`normalize.store.objects`):

    lease                 who holds the task: {"epoch", "holder", "until"}
    head                  the journal's head: {"epoch", "first", "tail", "checkpoint"}
    journal/SEQ-EPOCH     a segment: records SEQ.. rolled out of the head, made once
    state/EPOCH-N.json    a checkpoint, made once; the head names the current one

Ownership is the lease: made only if absent (`If-None-Match: *`), renewed
only if unchanged (`If-Match` with the etag its holder last wrote). A lease
whose `until` has passed (or that its holder released) is taken at the next
epoch, again only if unchanged, so of two takers one wins.

The fence is the head, not the lease. A holder writes the head once as it
takes the task (its epoch in it), and every append or checkpoint replaces the
head only if it is still the head this holder last wrote. Once a taker has
written its epoch there, a stale holder's next write is refused by the
store's own condition (412): nothing is read to decide it, so a holder
stopped between a check and a write cannot slip a record in. Records and the
checkpoint ride the head itself (the tail); a tail grown past `ROLL` records
is first made a segment (`If-None-Match`), then dropped from the head.

A reader takes the head first, then the segments before its tail: segments
never change once made, and a roll makes its segment before the head that
leaves those records out, so the two always join without a gap. A stale
holder may have made a segment whose head was then refused: it is named by
its older epoch, and of the segments starting at one record the reader takes
the newest epoch's (the holder that fenced it out rolls from the same record).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from normalize.errors import StaleEpochError, StoreError, TaskLockedError
from normalize.store.objects import Objects
from normalize.store.ownership import lease_seconds

ROLL = 64  # records in the head's tail before they are rolled into a segment


RECORD = "record"
"""Where under a store's URL the records live, apart from what a batch publishes for watchers
(`normalize.batch.publish`, redacted): a record is exact, as the data home is (see
`normalize.store.record`)."""


def record_key(task_id: str, name: str) -> str:
    return f"{RECORD}/tasks/{task_id}/{name}"


_key = record_key


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class LeaseState:
    """A lease as stored."""

    epoch: int
    holder: str
    until: float  # wall-clock time it lapses unless renewed (0: released or expired)

    @property
    def lapsed(self) -> bool:
        return time.time() > self.until

    @classmethod
    def parse(cls, raw: bytes, where: str) -> LeaseState:
        try:
            data = json.loads(raw)
            return cls(int(data["epoch"]), str(data["holder"]), float(data["until"]))
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{where}: a damaged lease (refused)") from None

    def encoded(self) -> bytes:
        return _json({"epoch": self.epoch, "holder": self.holder, "until": self.until})


class ObjectLease:
    """One holder's lease of one task (see the module doc)."""

    def __init__(self, objects: Objects, task_id: str, holder: str | None = None) -> None:
        self.objects = objects
        self.task_id = task_id
        self.key = _key(task_id, "lease")
        self.holder = holder or holder_name()
        self.epoch = 0
        self._etag = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = threading.Event()  # a renewal was refused: another holder took the task

    def acquire(self, epoch: int = 1) -> int:
        """Take the lease at an epoch ≥ `epoch` (and above any before it); the epoch.

        `TaskLockedError` when a live holder has it, or another taker won.
        """
        where = f"{self.objects.url}/{self.key}"
        found = self.objects.get(self.key)
        if found is None:
            self.epoch = max(1, epoch)
            etag = self.objects.put_if_absent(self.key, self._state().encoded())
        else:
            current = LeaseState.parse(found[0], where)
            if not current.lapsed:
                raise TaskLockedError(f"task {self.task_id} is running in {current.holder} "
                                      f"(its lease in {self.objects.url}, epoch "
                                      f"{current.epoch}); wait for it to end or stop it")
            self.epoch = max(epoch, current.epoch + 1)
            etag = self.objects.put_if_match(self.key, self._state().encoded(), found[1])
        if etag is None:
            raise TaskLockedError(f"task {self.task_id} was just taken by another holder "
                                  f"(epoch {self.epoch}, in {self.objects.url})")
        self._etag = etag
        return self.epoch

    def _state(self, until: float | None = None) -> LeaseState:
        return LeaseState(self.epoch, self.holder,
                          time.time() + lease_seconds() if until is None else until)

    def renew(self) -> bool:
        """Renew it if it is still ours (unchanged since we wrote it); whether it was."""
        etag = self.objects.put_if_match(self.key, self._state().encoded(), self._etag)
        if etag is None:
            self.lost.set()
            return False
        self._etag = etag
        return True

    def keep(self) -> None:
        """Renew it every quarter of a lease in the background, until `stop` or it is lost."""
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.task_id}",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(lease_seconds() / 4):
            try:
                if not self.renew():
                    return
            except StoreError:
                continue  # the store unreachable for a moment: try again; the fence holds

    def stop(self) -> None:
        self._stop.set()

    def release(self) -> None:
        """Stop renewing and mark it lapsed, so the next holder takes it at once."""
        self.stop()
        if not self.lost.is_set() and self._etag:
            self.objects.put_if_match(self.key, self._state(until=0.0).encoded(), self._etag)


def expire_lease(objects: Objects, task_id: str, epoch: int) -> bool:
    """Lapse the lease of `epoch` now (its executor saw its holder die); whether it did."""
    key = _key(task_id, "lease")
    found = objects.get(key)
    if found is None:
        return False
    current = LeaseState.parse(found[0], f"{objects.url}/{key}")
    if current.epoch != epoch:
        return False
    lapsed = LeaseState(current.epoch, current.holder, 0.0).encoded()
    return objects.put_if_match(key, lapsed, found[1]) is not None


def lease_of(objects: Objects, task_id: str) -> LeaseState | None:
    key = _key(task_id, "lease")
    found = objects.get(key)
    return None if found is None else LeaseState.parse(found[0], f"{objects.url}/{key}")


@dataclass
class Head:
    """The journal's head as stored."""

    epoch: int = 0
    first: int = 0  # the number of the tail's first record (all before it are in segments)
    tail: list[list[Any]] = field(default_factory=list)  # [epoch, record] each
    checkpoint: str = ""  # the key of the current checkpoint (state/…)

    @classmethod
    def parse(cls, raw: bytes, where: str) -> Head:
        try:
            data = json.loads(raw)
            return cls(int(data["epoch"]), int(data["first"]), list(data["tail"]),
                       str(data.get("checkpoint") or ""))
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{where}: a damaged journal head (refused)") from None

    def encoded(self) -> bytes:
        return _json({"epoch": self.epoch, "first": self.first, "tail": self.tail,
                      "checkpoint": self.checkpoint})


class FencedJournal:
    """One holder's writes to a task's record, each fenced by the head's etag."""

    def __init__(self, objects: Objects, task_id: str, epoch: int) -> None:
        self.objects = objects
        self.task_id = task_id
        self.epoch = epoch
        self.key = _key(task_id, "head")
        self.head = Head()
        self._etag = ""
        self._checkpoints = 0

    def _stale(self, what: str) -> StaleEpochError:
        return StaleEpochError(
            f"task {self.task_id}: the store refused this holder's {what} (epoch "
            f"{self.epoch}): another holder took the task over; this process stops without "
            "writing")

    def fence(self) -> None:
        """Write this epoch into the head: from now on an older holder's writes are refused."""
        where = f"{self.objects.url}/{self.key}"
        while True:
            found = self.objects.get(self.key)
            if found is None:
                head = Head(epoch=self.epoch)
                etag = self.objects.put_if_absent(self.key, head.encoded())
            else:
                head = Head.parse(found[0], where)
                if head.epoch > self.epoch:
                    raise self._stale("take-over")
                head.epoch = self.epoch
                etag = self.objects.put_if_match(self.key, head.encoded(), found[1])
            if etag is not None:
                self.head, self._etag = head, etag
                return
            # an older holder appended in between (before the fence): read it again

    def _replace(self, head: Head, what: str) -> None:
        etag = self.objects.put_if_match(self.key, head.encoded(), self._etag)
        if etag is None:
            raise self._stale(what)
        self.head, self._etag = head, etag

    def append(self, records: list[Any]) -> None:
        """Make `records` durable in the store, after all before them; refused when stale."""
        if len(self.head.tail) + len(records) > ROLL:
            self._roll()
        head = Head(self.epoch, self.head.first,
                    self.head.tail + [[self.epoch, r] for r in records], self.head.checkpoint)
        self._replace(head, "journal append")

    def _roll(self) -> None:
        """Move the tail into a segment (made once), then drop it from the head."""
        if not self.head.tail:
            return
        key = _key(self.task_id, f"journal/{self.head.first:012d}-{self.epoch:08d}")
        body = b"".join(_json(entry) + b"\n" for entry in self.head.tail)
        if self.objects.put_if_absent(key, body) is None:
            found = self.objects.get(key)  # this holder rolled it before a refused head
            if found is None or found[0] != body:
                raise self._stale("journal roll")
        head = Head(self.epoch, self.head.first + len(self.head.tail), [],
                    self.head.checkpoint)
        self._replace(head, "journal roll")

    def checkpoint(self, state: bytes) -> str:
        """Make `state` the task's current checkpoint (made once, named by the head); its key."""
        self._checkpoints += 1
        key = _key(self.task_id, f"state/{self.epoch:08d}-{self._checkpoints:06d}.json")
        if self.objects.put_if_absent(key, state) is None:
            raise self._stale("checkpoint")  # (only this holder names keys of its epoch)
        head = Head(self.epoch, self.head.first, self.head.tail, key)
        self._replace(head, "checkpoint")
        return key


def read_record(objects: Objects, task_id: str) -> tuple[Head | None, list[list[Any]]]:
    """The task's head and every journal record ([epoch, record]), oldest first."""
    key = _key(task_id, "head")
    found = objects.get(key)
    if found is None:
        return None, []
    head = Head.parse(found[0], f"{objects.url}/{key}")
    newest: dict[int, tuple[int, str]] = {}  # the segment starting at each record, by epoch
    for name in objects.list(_key(task_id, "journal/")):
        start, _, epoch = name.rsplit("/", 1)[-1].partition("-")
        if start.isdigit() and epoch.isdigit() and int(epoch) <= head.epoch:
            newest[int(start)] = max(newest.get(int(start), (-1, "")), (int(epoch), name))
    entries: list[list[Any]] = []
    while len(entries) < head.first:
        chosen = newest.get(len(entries))
        segment = objects.get(chosen[1]) if chosen is not None else None
        if segment is None:
            raise StoreError(f"{objects.url}/{_key(task_id, 'journal/')}: the segment from "
                             f"record {len(entries)} is missing (the journal is damaged)")
        entries += [json.loads(line) for line in segment[0].splitlines() if line.strip()]
    return head, entries + head.tail


def read_checkpoint(objects: Objects, task_id: str) -> bytes | None:
    """The task's current checkpoint, as the head names it (None: none yet)."""
    head, _ = read_record(objects, task_id)
    if head is None or not head.checkpoint:
        return None
    found = objects.get(head.checkpoint)
    return None if found is None else found[0]
