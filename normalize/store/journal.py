"""The append-only JSONL journal of a task: its whole history, one event per line."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from normalize.events import BaseEvent

TAIL_BYTES = 65536


class JournalWriter:
    """Appends events to a journal file; `durable` appends are fsynced."""

    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        redact: Callable[[Any], Any] | None = None,
    ) -> None:
        self.path = path
        self.fsync = fsync
        self.redact = redact
        self._fh: BinaryIO | None = None
        self.offset = 0

    def _file(self) -> BinaryIO:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab")
            self.offset = self._fh.seek(0, os.SEEK_END)
            if self.offset:
                self._repair_torn_tail()
        return self._fh

    def _repair_torn_tail(self) -> None:
        """Start on a fresh line if the last process died mid-line."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset - 1)
            last = fh.read(1)
        if last != b"\n" and self._fh is not None:
            self._fh.write(b"\n")
            self._fh.flush()
            self.offset += 1

    def append(self, event: BaseEvent, *, durable: bool = False) -> None:
        data = event.to_dict()
        if self.redact is not None:
            data = self.redact(data)
        fh = self._file()
        line = (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        fh.write(line)
        fh.flush()
        self.offset += len(line)
        if durable and self.fsync:
            os.fsync(fh.fileno())

    def sync(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


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
