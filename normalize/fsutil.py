"""Crash-safe file writes shared by the edit tools and the task store."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FileFlock", "LockTimeout", "atomic_write", "fsync_directory", "private_dirs"]


def atomic_write(
    path: Path | str, data: bytes, *, fsync: bool = True, mode: int | None = None
) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never half of one.

    The bytes go to a temporary file in the same directory, which is flushed,
    fsynced and renamed over the target; then the directory is fsynced so the
    rename itself survives a crash. A symlink is written through to its target.
    The file keeps its permission bits; a new file gets `mode` or the umask's
    default (`0o666 & ~umask`, applied by the kernel).
    """
    target = Path(os.path.realpath(path))
    directory = target.parent
    try:
        keep = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        keep = None
    tmp = directory / f".{target.name[:200]}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        wanted = mode if mode is not None else keep
        if wanted is not None:
            os.chmod(tmp, wanted)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_directory(directory)


def private_dirs(path: Path | str) -> Path:
    """Make `path` and each missing parent owner-only (0700), whatever the umask; `path`.

    `Path.mkdir(parents=True)` gives the parents the umask's default mode
    (0777 under `umask 000`); a data home and its caches must never be so.
    """
    path = Path(path)
    missing: list[Path] = []
    here = path
    while not here.is_dir() and here.parent != here:
        missing.append(here)
        here = here.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
    return path


def fsync_directory(directory: Path | str) -> None:
    """Flush a directory entry to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def json_bytes(value: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """`value` as compact UTF-8 JSON, exactly: a lone surrogate survives the round trip.

    A file name that is not valid UTF-8 reaches Python as lone surrogates; UTF-8
    cannot encode them, so such a value is written with ASCII escapes instead
    (`"\\udce9"`), which `json.loads` turns back into the same string.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                          default=default).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), default=default).encode()


class LockTimeout(TimeoutError):
    """A `FileFlock` was not acquired in time: another process holds it."""


class FileFlock:
    """An exclusive `flock` on a lock file, across processes and this process's threads.

    What the `filelock` package's Unix lock does, without its 18 ms of imports
    on every start that takes a lock (a listing writing the index, a run
    taking its task): the kernel drops the lock when its process dies, and
    a process using `filelock` on the same file is excluded too (both `flock`).
    Not re-entrant.
    """

    POLL = 0.01  # seconds between two tries while waiting

    def __init__(self, path: Path | str, *, timeout: float = -1, mode: int = 0o600) -> None:
        self.path = str(path)
        self.timeout = timeout
        self.mode = mode
        self._fd: int | None = None
        self._threads = threading.Lock()

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None = None) -> None:
        """Take the lock, waiting up to `timeout` seconds (< 0: for ever); `LockTimeout` else."""
        wait = self.timeout if timeout is None else timeout
        deadline = None if wait < 0 else time.monotonic() + wait
        if not self._threads.acquire(timeout=-1 if deadline is None else max(0.0, wait)):
            raise LockTimeout(f"{self.path} is held by another thread")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
        except BaseException:
            self._threads.release()
            raise
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise LockTimeout(f"{self.path} is held by another process") from None
                    time.sleep(self.POLL)
        except BaseException:
            os.close(fd)
            self._threads.release()
            raise
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # (closing the descriptor drops the flock)
            self._threads.release()

    def __enter__(self) -> FileFlock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
