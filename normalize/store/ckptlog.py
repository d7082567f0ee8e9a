"""The checkpoint log: a task's checkpoints appended as records between rewrites of its file.

A checkpoint used to rewrite the whole task file (a temporary file, an fsync,
a rename, an fsync of the directory) at every step. Now a run appends one
line to `tasks/ID.ckpt` per checkpoint (one fdatasync when durable) and
rewrites the task file only every `EVERY` records and when the run ends.

Each record is the whole task as the task file would hold it, stamped with
the generation (`log_gen`) of the task file it follows. Rewriting the task
file gives it a new generation and then removes the log, so a log left by a
crash between the two holds only records of an older generation, which
loading ignores. Loading takes the task file, then the last whole record of
its generation; a torn last record (the process died while writing it) is
skipped, as the journal's torn line is, and the record before it is used.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from normalize.faults import armed, crash_point
from normalize.fsutil import fsync_directory

EVERY = 512  # appended records between two rewrites of the task file (each rewrite
# costs about six synchronous metadata writes; the log is read from its end)
FILE_MODE = 0o600


@dataclass
class LogState:
    """A run's open checkpoint log: its generation, its handle and how many records it has."""

    gen: int
    epoch: int
    fd: int | None = None
    records: int = 0

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def append_record(path: Path, log: LogState, payload: bytes, *, fsync: bool) -> None:
    """Append one record (a line) to the log; created on the first record of a generation.

    One write and (durable) one fdatasync; when the tests arm the crash point
    `checkpoint_append`, the record is written in two halves and the process
    dies between them.
    """
    created = False
    if log.fd is None:
        log.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        created = True
    try:
        if armed("checkpoint_append"):
            half = len(payload) // 2
            os.write(log.fd, payload[:half])
            crash_point("checkpoint_append")
            payload = payload[half:]
        os.write(log.fd, payload)
        if fsync:
            os.fdatasync(log.fd)
            if created:  # the new file's name must survive a power cut as well
                fsync_directory(path.parent)
    except BaseException:
        log.close()  # a retry starts the log again after a full rewrite
        raise
    log.records += 1


def latest(path: Path, gen: Any, warn: Callable[[str], None] | None = None,
           ) -> dict[str, Any] | None:
    """The last whole record of generation `gen` in the log, or None (no log, or none newer).

    Read from the end, a block at a time: the cost is the last records', not the log's.
    """
    if gen is None:
        return None
    try:
        fh = open(path, "rb")  # (closed below, after the lines it gives)
    except FileNotFoundError:
        return None
    with fh:
        return _latest(path, _last_lines(fh), gen, warn)


def _latest(path: Path, lines: Iterator[bytes], gen: Any,
            warn: Callable[[str], None] | None) -> dict[str, Any] | None:
    torn = False
    for line in lines:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            torn = True
            continue
        if torn and warn is not None:
            warn(f"{path}: the last checkpoint record was torn (the process writing it "
                 "stopped mid-record); the one before it is used")
        if isinstance(record, dict) and record.get("log_gen") == gen:
            return record
        return None
    if torn and warn is not None:
        warn(f"{path}: the only checkpoint record was torn; the task file is used")
    return None


BLOCK = 1 << 16


def _last_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The log's non-empty lines, last first, read backwards from its end."""
    end = fh.seek(0, os.SEEK_END)
    rest = b""  # the start of a line whose beginning is not read yet
    while end > 0:
        start = max(0, end - BLOCK)
        fh.seek(start)
        chunk = fh.read(end - start) + rest
        end = start
        first, *whole = chunk.split(b"\n")
        for line in reversed(whole):
            if line.strip():
                yield line
        rest = first
    if rest.strip():
        yield rest


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
