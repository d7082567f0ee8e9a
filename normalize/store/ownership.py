"""Ownership of a task (its lock, owner file and epoch fence) and atomic file writes."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Protocol

from normalize.errors import StaleEpochError, StoreError, TaskLockedError
from normalize.faults import crash_point
from normalize.fsutil import FileFlock, LockTimeout, fsync_directory
from normalize.store.journal import write_hint


class TaskStore(Protocol):
    """What a lock needs of its store (`normalize.store.taskstore.TaskStore`)."""

    tasks_dir: Path
    fsync: bool

    def owner(self, task_id: str) -> tuple[int, int] | None: ...

    def sweep(self, task_id: str) -> None: ...

    def take_record(self, task_id: str, epoch: int) -> int: ...

    def drop_record(self, task_id: str) -> None: ...

FILE_MODE = 0o600


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True,
                       crash: str | None = None, owned: bool = False) -> None:
    """Write `data` to `path` so that readers see the old or the new file, never a mix.

    `crash` names the fault-injection point reached with half the bytes written.
    `owned` says the caller holds the file's lock, so a fixed temporary name is
    safe (and cheaper than a unique one, at every checkpoint).
    """
    if owned:
        tmp = str(path.parent / f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    else:
        import tempfile  # (lazily: a listing never writes)

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            half = len(data) // 2
            fh.write(data[:half])
            if crash is not None:
                crash_point(crash)
            fh.write(data[half:])
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_directory(path.parent)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def lease_seconds() -> float:
    """How long a lease lasts without a heartbeat (`NORMALIZE_LEASE_SECONDS`, default 60)."""
    try:
        return max(0.2, float(os.environ.get("NORMALIZE_LEASE_SECONDS") or LEASE_SECONDS))
    except ValueError:
        return LEASE_SECONDS


LEASE_SECONDS = 60.0


class Lease:
    """A task's lease for one epoch: `tasks/ID.lease.EPOCH`, made by a conditional create.

    Its holder renews it (its mtime) from a heartbeat thread; a lease not
    renewed for `lease_seconds()` has expired, and its task may be taken over
    (at the next epoch) even while its holder still holds the flock: a
    stopped or partitioned process. Only one process can make the lease of
    an epoch (`O_EXCL`), so two takers never both win.
    """

    def __init__(self, tasks_dir: Path, task_id: str, epoch: int) -> None:
        self.path = tasks_dir / f"{task_id}.lease.{epoch}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> bool:
        """Make the lease; False when another process made it first."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        except FileExistsError:
            return False
        return True

    def expired(self) -> bool:
        """Whether the lease went unrenewed too long (a missing one never expires)."""
        try:
            return time.time() - os.stat(self.path).st_mtime > lease_seconds()
        except OSError:
            return False

    def keep(self) -> None:
        """Renew the lease in the background until `drop`."""
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.path.name}",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(lease_seconds() / 4):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def stop(self) -> None:
        """Stop renewing it (it then expires)."""
        self._stop.set()

    def drop(self) -> None:
        """Stop renewing it and remove it."""
        self.stop()
        with contextlib.suppress(OSError):
            self.path.unlink()


def lease_held(tasks_dir: Path, task_id: str, epoch: int) -> bool | None:
    """Whether someone renews the task's lease of `epoch` (None: there is no such lease).

    This is how a process on another machine sees that the task still runs.
    """
    lease = Lease(tasks_dir, task_id, epoch)
    if not lease.path.exists():
        return None
    return not lease.expired()


def expire_lease(tasks_dir: Path, task_id: str, epoch: int) -> None:
    """End the lease of `epoch` now: its executor reported the attempt holding it dead.

    The next attempt then takes the task over at once instead of after
    `lease_seconds()`; should the holder live on after all (cut off, not dead),
    it is fenced like any other stale holder.
    """
    with contextlib.suppress(OSError):
        os.utime(tasks_dir / f"{task_id}.lease.{epoch}", (0, 0))


class TaskLock:
    """Ownership of one task: an flock, an owner file naming pid and epoch, and a lease.

    The flock is released by the kernel when its process dies, so a task left
    by a killed process is simply taken over. A process that still holds the
    flock but stopped renewing its lease (stopped, cut off) loses the task
    too, once the lease expires. Each acquisition records a new, higher epoch
    in the owner file; `verify` (run before every durable journal append and
    every checkpoint: once per durable write) refuses a writer whose epoch is
    no longer the recorded one — a process that lost the task to another
    must not write over it.
    """

    OWNER_WAIT = 2.0  # seconds a refused process waits for the winner to name itself

    def __init__(self, store: TaskStore, task_id: str) -> None:
        self.store = store
        self.task_id = task_id
        self._lock = FileFlock(store.tasks_dir / f"{task_id}.lock", timeout=0, mode=FILE_MODE)
        self.epoch = 0
        self.lease: Lease | None = None
        self._stamp: tuple[int, int] | None = None
        self.owner_path = store.tasks_dir / f"{task_id}.owner"
        self._owner = str(self.owner_path)  # the fence stats it once per durable write
        self._recorded = False  # taken in the store of record too (released with the lock)

    def acquire(self, epoch: int, *, record: bool = False) -> None:
        """Take the lock or fail at once naming the holder; record a new epoch (≥ `epoch`).

        `record` (a run): the task is taken in its store of record too, when this
        process keeps one (`normalize.store.record`), and its epoch there is the one.
        """
        previous = self.store.owner(self.task_id)
        try:
            self._lock.acquire(timeout=0)
        except LockTimeout:
            if previous is None or not Lease(self.store.tasks_dir, self.task_id,
                                             previous[1]).expired():
                raise TaskLockedError(
                    f"task {self.task_id} is running in {self._holder()}; wait for it to end "
                    "or stop that process first",
                ) from None
            # its holder stopped renewing its lease: take the task over (it is fenced)
        except OSError as exc:
            raise StoreError(f"cannot lock task {self.task_id}: {self.store.tasks_dir}: "
                             f"{exc.strerror or exc}", hint=write_hint(exc)) from exc
        self.epoch = max(epoch, previous[1] + 1 if previous else 0)
        if record:
            self._take_record()
        lease = self.lease = self._claim()
        owner = json.dumps({"pid": os.getpid(), "epoch": self.epoch}).encode()
        try:
            atomic_write_bytes(self.owner_path, owner, fsync=self.store.fsync)
            st = os.stat(self.owner_path)
        except OSError as exc:
            self.release()
            raise StoreError(f"cannot take task {self.task_id}: cannot write "
                             f"{self.owner_path}: {exc.strerror or exc}",
                             hint=write_hint(exc)) from exc
        self._stamp = (st.st_ino, st.st_mtime_ns)
        lease.keep()
        self.store.sweep(self.task_id)
        for old in self.store.tasks_dir.glob(f"{self.task_id}.lease.*"):
            if old != lease.path:  # the leases of earlier epochs
                with contextlib.suppress(OSError):
                    old.unlink()

    def _claim(self) -> Lease:
        """Make the lease of this epoch (`O_EXCL`): of two takers, one wins."""
        self.lease = Lease(self.store.tasks_dir, self.task_id, self.epoch)
        try:
            claimed = self.lease.claim()
        except OSError as exc:
            self.lease = None
            self.release()
            raise StoreError(f"cannot take task {self.task_id}: cannot write "
                             f"{self.store.tasks_dir}: {exc.strerror or exc}",
                             hint=write_hint(exc)) from exc
        if not claimed:
            self.lease = None
            self.release()
            raise TaskLockedError(f"task {self.task_id} was just taken by another process "
                                  f"(epoch {self.epoch})")
        return self.lease

    def _take_record(self) -> None:
        """Take the task in the store of record (its epoch may be above this home's)."""
        try:
            self.epoch = self.store.take_record(self.task_id, self.epoch)
        except BaseException:
            self._lock.release()
            raise
        self._recorded = True

    def _holder(self) -> str:
        """Who holds the lock: the winner writes its owner file just after locking."""
        deadline = time.monotonic() + self.OWNER_WAIT
        while True:
            holder = self.store.owner(self.task_id)
            if holder is not None and pid_alive(holder[0]):
                return f"process {holder[0]}"
            if time.monotonic() >= deadline:
                return "another process"
            time.sleep(0.02)

    def verify(self) -> None:
        """Raise `StaleEpochError` when another process has taken the task over since."""
        try:
            st = os.stat(self._owner)
        except OSError:
            return  # no owner recorded (or unreadable): nothing says we lost the task
        if self._stamp == (st.st_ino, st.st_mtime_ns):
            return
        holder = self.store.owner(self.task_id)
        if holder is not None and holder[1] != self.epoch:
            raise StaleEpochError(
                f"task {self.task_id} was taken over by process {holder[0]} (epoch "
                f"{holder[1]}); this process (epoch {self.epoch}) stops without writing",
            )
        self._stamp = (st.st_ino, st.st_mtime_ns)

    def release(self) -> None:
        if self.lease is not None:
            if self.store.owner(self.task_id) in (None, (os.getpid(), self.epoch)):
                self.lease.drop()  # (a process that lost the task leaves its taker's alone)
            else:
                self.lease.stop()
            self.lease = None
        if self._recorded:
            self._recorded = False
            self.store.drop_record(self.task_id)
        if self._lock.is_locked:
            self._lock.release()

    @property
    def held(self) -> bool:
        return self._lock.is_locked
