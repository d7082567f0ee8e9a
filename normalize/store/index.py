"""The task index: one small summary per task, so listing never opens every task file.

`tasks/index.jsonl` holds a line per write of a task file (created, rewritten
whole, removed), appended under the store's index lock: the task's summary
(status, goal, driver, turn, times, the question it waits on) and the
identity of the file it summarizes (inode, mtime, size). The last line of an
id wins.

A reader trusts a line only while the task file is still the one it
describes and no checkpoint log (`ID.ckpt`) was appended after it; any other
task (a running one, one written by an older normalize, one edited by hand)
is read from its own file, as before. So the index is never wrong, only
sometimes incomplete; a writer that finds it missing rebuilds it, and one
that finds it mostly superseded lines compacts it. A driver config is never
read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from filelock import FileLock

NAME = "index.jsonl"
LOCK = ".index.lock"
FIELDS = ("id", "status", "goal", "driver", "workspace", "workflow", "turn", "updated_at",
          "created_at")
COMPACT_BYTES = 1 << 20  # an index smaller than this is never compacted
LOCK_WAIT = 10.0  # seconds a writer waits for another writer of the index

Summary = dict[str, Any]


def summary_of(data: dict[str, Any]) -> Summary:
    """The listing's fields of a task (as its file holds it), and the question it waits on."""
    summary = {name: data.get(name) for name in FIELDS}
    pending = data.get("pending")
    summary["question"] = pending.get("question") if isinstance(pending, dict) else None
    return summary


def stamp(path: Path) -> list[int] | None:
    """The identity of a file as the index records it: inode, mtime (ns), size."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


def read(tasks_dir: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """The index's last line per task id (removed ids left out), and its number of lines."""
    try:
        raw = (tasks_dir / NAME).read_bytes()
    except OSError:
        return {}, 0
    lines = raw.splitlines()
    try:  # one parse for the whole file; line by line only when one is damaged
        parsed = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
    except ValueError:
        parsed = []
        for line in lines:
            with contextlib.suppress(ValueError):
                parsed.append(json.loads(line))
    entries: dict[str, dict[str, Any]] = {}
    for entry in parsed:
        try:
            task_id = entry["id"]
        except (KeyError, TypeError):
            continue  # a damaged line: that task is read from its file
        if entry.get("gone"):
            entries.pop(task_id, None)
        else:
            entries[task_id] = entry
    return entries, len(lines)


def _line(task_id: str, summary: Summary | None, file_stamp: list[int] | None) -> bytes:
    entry: dict[str, Any] = {"id": task_id, "gone": 1} if summary is None else \
        {"id": task_id, "f": file_stamp, "s": summary}
    return (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def note(tasks_dir: Path, task_id: str, summary: Summary | None) -> None:
    """Record a task file just written (or, `summary=None`, removed); best effort.

    A failure to index never fails the write it follows: a task missing
    from the index is listed from its own file.
    """
    file_stamp = None if summary is None else stamp(tasks_dir / f"{task_id}.json")
    with contextlib.suppress(OSError, TimeoutError), _locked(tasks_dir):
        fd = os.open(tasks_dir / NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, _line(task_id, summary, file_stamp))
        finally:
            os.close(fd)


def rewrite(tasks_dir: Path, summaries: Iterable[tuple[str, Summary, list[int] | None]]) -> None:
    """Replace the index with one line per task (a rebuild, or a compaction); best effort."""
    from normalize.store.ownership import atomic_write_bytes

    data = b"".join(_line(task_id, summary, file_stamp)
                    for task_id, summary, file_stamp in summaries)
    with contextlib.suppress(OSError, TimeoutError), _locked(tasks_dir):
        atomic_write_bytes(tasks_dir / NAME, data, fsync=False)


def _locked(tasks_dir: Path) -> FileLock:
    from filelock import FileLock  # (lazily: a listing never writes the index)

    return FileLock(str(tasks_dir / LOCK), timeout=LOCK_WAIT, mode=0o600)


def listing(tasks_dir: Path) -> tuple[list[Summary], list[str], dict[str, list[int] | None]]:
    """What the index says: the summaries it vouches for, the ids to read from their files,
    and the current stamp of each of those files (for a writer that rebuilds the index)."""
    entries, _ = read(tasks_dir)
    files: dict[str, os.DirEntry[str]] = {}
    logs: set[str] = set()
    try:
        with os.scandir(tasks_dir) as scan:
            for entry in scan:
                name = entry.name
                if name.endswith(".json") and not name.startswith("."):
                    files[name[:-5]] = entry
                elif name.endswith(".ckpt"):
                    logs.add(name[:-5])
    except OSError:
        return [], [], {}
    trusted: list[Summary] = []
    unread: list[str] = []
    stamps: dict[str, list[int] | None] = {}
    for task_id, entry in files.items():
        indexed = entries.get(task_id)
        try:
            st = entry.stat()
            current: list[int] | None = [st.st_ino, st.st_mtime_ns, st.st_size]
        except OSError:
            current = None
        if indexed is not None and task_id not in logs and current is not None \
                and indexed.get("f") == current and isinstance(indexed.get("s"), dict):
            trusted.append(indexed["s"])
        else:
            unread.append(task_id)
            stamps[task_id] = current
    return trusted, unread, stamps
