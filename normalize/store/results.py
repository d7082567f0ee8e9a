"""Results kept exactly for recovery: what the journal's preview of a result would lose.

The journal shows an `action_finished` result as a redacted preview of at most
4,000 characters (house rule 11: what is shown is redacted). A resumed run
that finds an action finished after the last checkpoint hands its result to
the driver again, and a driver may keep it (a workflow's `capture`): that is
executed state, so it must be the whole result. When the preview would not
carry it whole, the engine writes the result here (owner-only, never
redacted) before the journal line, each record stamped with the emitter's
`seq` at that moment; recovery uses the records newer than the checkpoint it
resumes from. The file is removed at the next checkpoint, when no record in
it can be needed again.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from normalize.fsutil import json_bytes

FILE_MODE = 0o600


def keep(path: Path, key: str, seq: int, result: dict[str, Any], *, fsync: bool) -> None:
    """Append one action's whole result; fdatasync'd when its journal line will be."""
    line = json_bytes({"key": key, "seq": seq, "result": result}) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.write(fd, line)
        if fsync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def since(path: Path, seq: int) -> dict[str, dict[str, Any]]:
    """The kept results (by action key, the last for a key) written after event `seq`.

    A torn last line (the process died writing it) is skipped: its journal
    line was never written, so no finished action needs it.
    """
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return {}
    kept: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("result"), dict) and \
                isinstance(record.get("seq"), int) and record["seq"] >= seq:
            kept[str(record.get("key"))] = record["result"]
    return kept


def clear(path: Path) -> None:
    """Remove the kept results (a checkpoint made them unneeded)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
