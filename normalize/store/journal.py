"""The append-only JSONL journal of a task: its whole history, one event per line."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from normalize.errors import StoreError
from normalize.fsutil import json_bytes, private_dirs

if TYPE_CHECKING:  # not at run time: listing tasks need not build every event class
    from normalize.events import BaseEvent, Event

TAIL_BYTES = 65536

WRITABLE_HINT = "make the data directory writable, or point NORMALIZE_HOME elsewhere"
SPACE_HINT = "free some disk space, then resume the task"


def write_hint(exc: OSError) -> str:
    """What to do about a failed write: free space, or fix permissions."""
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return SPACE_HINT
    return WRITABLE_HINT


class JournalWriter:
    """Appends events to a journal file; `durable` appends are fsynced.

    `guard`, when set, runs before every durable append and may raise (the
    engine uses it to stop a process that lost ownership of the task from
    writing): the fence costs a `stat`, so it is paid once per durable write,
    not for every line. A failed write raises `StoreError` naming the file.

    `on_append`, when set, is called after each line is written with the event
    and whether the line was fsynced: a killed process cannot reveal a missing
    fsync, so this is how an audit (or a test) sees which writes are durable.
    """

    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        redact: Callable[[Any], Any] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.redact = redact
        self.warn = warn
        self.guard: Callable[[], None] | None = None
        self.on_open: Callable[[], None] | None = None  # run once, when the file is opened
        self._fh: BinaryIO | None = None
        self.offset = 0
        self.on_append: Callable[[BaseEvent, bool], None] | None = None
        # each line as written, and whether durable: the store of record's copy (it raises
        # when the store refuses it, before the caller goes on to the effect the line guards)
        self.mirror: Callable[[bytes, bool], None] | None = None

    def _file(self) -> BinaryIO:
        if self._fh is None:
            private_dirs(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._fh = os.fdopen(fd, "ab")
            self.offset = self._fh.seek(0, os.SEEK_END)
            hook, self.on_open = self.on_open, None
            if hook is not None:
                hook()
            if self.offset:
                self._repair_torn_tail()
        return self._fh

    def _repair_torn_tail(self) -> None:
        """Start on a fresh line if the last process died mid-line (that line is lost)."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset - 1)
            last = fh.read(1)
        if last != b"\n" and self._fh is not None:
            self._fh.write(b"\n")
            self._fh.flush()
            self.offset += 1
            if self.warn is not None:
                self.warn(f"{self.path}: the last line was torn (the process writing it "
                          "stopped mid-line); that one event is skipped")

    def append(self, event: BaseEvent, *, durable: bool = False) -> None:
        if durable and self.guard is not None:
            self.guard()
        if self.redact is not None:
            line = json_bytes(self.redact(event.to_dict())) + b"\n"
        else:  # the bytes `--json` prints too: the event is encoded once
            line = event.to_bytes() + b"\n"
        try:
            fh = self._file()
            fh.write(line)
            fh.flush()
            synced = durable and self.fsync
            if synced:
                os.fsync(fh.fileno())
        except OSError as exc:
            self._drop_handle()
            raise StoreError(f"cannot write the journal {self.path}: {exc.strerror or exc}",
                             hint=write_hint(exc)) from exc
        self.offset += len(line)
        if self.mirror is not None:
            self.mirror(line, durable)
        if self.on_append is not None:
            self.on_append(event, synced)

    def _drop_handle(self) -> None:
        """Drop the handle after a failed write, so a retry re-opens and re-checks the tail."""
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    def sync(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._drop_handle()


def read_journal(
    path: Path, *, offset: int = 0, warn: Callable[[str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The events of a journal from byte `offset`; a damaged line is skipped with a warning."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        if offset:
            fh.seek(offset)
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if warn is not None:
                    torn = "" if raw.endswith(b"\n") else " (a torn last line)"
                    where = f"{path}:{number}" if not offset else f"{path}@{offset}"
                    warn(f"{where}: skipped an unreadable journal line{torn}")
                continue
            if isinstance(data, dict):
                yield data


def read_events(
    path: Path, *, offset: int = 0, warn: Callable[[str], None] | None = None
) -> list[Event]:
    """The events of a journal from byte `offset`, typed: decoded in one call by the union's
    decoder, or line by line (what `read_journal` skips is skipped, with its warning) when
    a line is damaged or of a type this version does not know."""
    from normalize.events import decode_line, decode_lines

    try:
        with open(path, "rb") as fh:
            if offset:
                fh.seek(offset)
            raw = fh.read()
    except FileNotFoundError:
        return []
    fast = decode_lines(raw)
    if fast is not None:
        return fast
    events: list[Event] = []
    for number, line in enumerate(raw.splitlines(keepends=True), 1):
        if not line.strip():
            continue
        event = decode_line(line)
        if event is not None:
            events.append(event)
        elif warn is not None and not _is_json(line):
            torn = "" if line.endswith(b"\n") else " (a torn last line)"
            where = f"{path}:{number}" if not offset else f"{path}@{offset}"
            warn(f"{where}: skipped an unreadable journal line{torn}")
    return events


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def tail_events(path: Path, limit: int = 50) -> list[dict[str, Any]]:
    """The last complete events of a journal, read from its end only."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            chunk = fh.read()
    except FileNotFoundError:
        return []
    lines = chunk.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first line is probably cut
    events: list[dict[str, Any]] = []
    for raw in lines:
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data, dict):
            events.append(data)
    return events[-limit:]
