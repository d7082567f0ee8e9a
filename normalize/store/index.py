"""The task index: one small summary per task, so listing never opens every task file.

`tasks/index.jsonl` holds a line per write of a task file (created, rewritten
whole, removed), appended under the store's index lock: a JSON array of the
task's summary in `FIELDS` order (id, status, goal, driver, turn, times, its
parent, the question it waits on), then the identity of the file it summarizes (inode,
mtime, size); `[ID]` alone says the task was removed. The last line of an
id wins.

Deciding whether the index can be trusted costs one `stat` of `tasks/` when
the index is sealed. A listing that checked every task file's identity
against the index (a `stat` each) appends a seal, `{"dir": MTIME, "read":
[IDS], "at": TIME, "last": ID}`: the directory's mtime it saw, and the tasks whose own files must
still be read (those with a checkpoint log, `ID.ckpt`, which grows without
renaming anything), and the newest of the others (`last`, `at`), so `resume
last` reads the index's tail alone. While that seal is the index's last line and `tasks/`
still has that mtime, no task file was created, renamed over or removed
since, so every other summary holds without looking at its file. A seal is
written only for a directory unchanged for `SETTLE` seconds, so any later
change gives it a new mtime even on a coarse clock. A task file edited in
place by hand (same name, same inode) is seen at the first change of
`tasks/` after it; normalize itself always renames.

A task the index does not vouch for (a running one, one written by an older
normalize) is read from its own file, and the listing that read it writes
its line, so the index is never wrong, only sometimes incomplete. A driver
config is never read.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.fsutil import FileFlock, json_bytes

NAME = "index.jsonl"
LOCK = ".index.lock"
FIELDS = ("id", "status", "goal", "driver", "workspace", "workflow", "turn", "updated_at",
          "created_at", "parent", "question")
COMPACT_BYTES = 1 << 20  # an index smaller than this is never compacted
LOCK_WAIT = 10.0  # seconds a writer waits for another writer of the index
SETTLE = 2.0  # seconds `tasks/` must be unchanged before a listing seals the index

Summary = dict[str, Any]
Row = list[Any]  # a summary's values in `FIELDS` order (an index line, perhaps with its stamp)
Stamp = list[int]
ID, STATUS, GOAL, DRIVER, WORKSPACE, WORKFLOW, TURN, UPDATED, CREATED, PARENT, QUESTION = range(11)
# (an index line of another length, written before `parent`, is read from its task file anew)


def summary_of(data: dict[str, Any]) -> Summary:
    """The listing's fields of a task (as its file holds it), and the question it waits on."""
    summary = {name: data.get(name) for name in FIELDS[:-1]}
    pending = data.get("pending")
    summary["question"] = pending.get("question") if isinstance(pending, dict) else None
    return summary


def stamp(path: Path) -> Stamp | None:
    """The identity of a file as the index records it: inode, mtime (ns), size."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


@dataclass
class Index:
    """What `index.jsonl` says: the last entry per task id, and its seal if that came last."""

    entries: dict[str, list[Any]] = field(default_factory=dict)  # [*summary, stamp]
    lines: int = 0
    seal: dict[str, Any] | None = None



def read(tasks_dir: Path) -> Index:
    """The index as it is on disk; damaged lines are skipped (their tasks read from files)."""
    try:
        raw = (tasks_dir / NAME).read_bytes()
    except OSError:
        return Index()
    lines = raw.count(b"\n")
    collecting = gc.isenabled()
    gc.disable()  # (JSON makes no cycles: 20,000 new lists need no collection passes)
    try:  # one parse for the whole file; line by line only when one is damaged
        parsed = json.loads(b"[" + raw.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except ValueError:
        parsed = []
        for line in raw.splitlines():
            with contextlib.suppress(ValueError):
                parsed.append(json.loads(line))
    finally:
        if collecting:
            gc.enable()
    found = Index(lines=lines)
    entries = found.entries
    whole = len(FIELDS) + 1
    for entry in parsed:
        if type(entry) is list and entry and type(entry[0]) is str:
            if len(entry) == whole:
                entries[entry[0]] = entry
            elif len(entry) == 1:
                entries.pop(entry[0], None)
    last = parsed[-1] if parsed else None
    if isinstance(last, dict) and isinstance(last.get("dir"), int) \
            and isinstance(last.get("read"), list):
        found.seal = last
    return found


def _line(task_id: str, summary: Summary | None, file_stamp: Stamp | None) -> bytes:
    # times are kept exact, not rounded: `last` compares them with the states of tasks whose
    # checkpoint log moved on, and tasks saved within one millisecond must keep their order
    entry: list[Any] = [task_id] if summary is None else \
        [task_id, *(summary.get(name) for name in FIELDS[1:]), file_stamp]
    return json_bytes(entry) + b"\n"


def _append(tasks_dir: Path, data: bytes) -> None:
    fd = os.open(tasks_dir / NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def note(tasks_dir: Path, task_id: str, summary: Summary | None) -> None:
    """Record a task file just written (or, `summary=None`, removed); best effort.

    A failure to index never fails the write it follows: a task missing
    from the index is listed from its own file.
    """
    file_stamp = None if summary is None else stamp(tasks_dir / f"{task_id}.json")
    with contextlib.suppress(OSError, TimeoutError), _locked(tasks_dir):
        _append(tasks_dir, _line(task_id, summary, file_stamp))


def rewrite(tasks_dir: Path, summaries: Iterable[tuple[str, Summary, Stamp | None]]) -> None:
    """Replace the index with one line per task (a rebuild, or a compaction); best effort."""
    from normalize.store.ownership import atomic_write_bytes

    data = b"".join(_line(task_id, summary, file_stamp)
                    for task_id, summary, file_stamp in summaries)
    with contextlib.suppress(OSError, TimeoutError), _locked(tasks_dir):
        atomic_write_bytes(tasks_dir / NAME, data, fsync=False)


def _locked(tasks_dir: Path) -> FileFlock:
    return FileFlock(tasks_dir / LOCK, timeout=LOCK_WAIT, mode=0o600)


@dataclass
class Listing:
    """The rows the index vouches for (each an index line: `FIELDS` values, then the stamp),
    the ids to read from their own files, and (when every file was checked) what a seal
    needs: the stamps of the files read."""

    trusted: list[Row]
    unread: list[str]
    stamps: dict[str, Stamp | None] = field(default_factory=dict)
    logs: set[str] = field(default_factory=set)  # ids with a checkpoint log
    missing: list[str] = field(default_factory=list)  # indexed ids whose file is gone
    dir_mtime: int | None = None  # set when the listing checked every file (it may seal)


def listing(tasks_dir: Path) -> Listing:
    """What the index says, trusted at one `stat` when sealed, else file by file."""
    found = read(tasks_dir)
    try:
        dir_mtime = os.stat(tasks_dir).st_mtime_ns
    except OSError:
        return Listing([], [])
    seal = found.seal
    if seal is not None and seal["dir"] == dir_mtime:
        unread = [task_id for task_id in seal["read"] if isinstance(task_id, str)]
        skip = set(unread)
        entries = found.entries
        return Listing(list(entries.values()) if not skip else
                       [row for task_id, row in entries.items() if task_id not in skip], unread)
    checked = _check_files(tasks_dir, found)
    checked.dir_mtime = dir_mtime
    return checked


def _check_files(tasks_dir: Path, found: Index) -> Listing:
    """The listing that compares every task file's identity with its index entry."""
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
        return Listing([], [])
    checked = Listing([], [], logs=logs)
    for task_id, entry in files.items():
        indexed = found.entries.get(task_id)
        try:
            st = entry.stat()
            current: Stamp | None = [st.st_ino, st.st_mtime_ns, st.st_size]
        except OSError:
            current = None
        if indexed is not None and task_id not in logs and current is not None \
                and indexed[-1] == current:
            checked.trusted.append(indexed)
        else:
            checked.unread.append(task_id)
            checked.stamps[task_id] = current
    checked.missing = [task_id for task_id in found.entries if task_id not in files]
    return checked


TAIL = 1 << 16  # bytes of the index read for its seal alone


@dataclass
class Newest:
    """What a valid seal says of the newest task: it, unless one of `read` moved on since."""

    task_id: str | None
    updated_at: float
    read: list[str]


def sealed_newest(tasks_dir: Path) -> Newest | None:
    """The newest task as the index's seal names it (reading only the index's tail), or None
    when the index is not sealed for `tasks/` as it is now."""
    try:
        with open(tasks_dir / NAME, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL))
            tail = fh.read()
        dir_mtime = os.stat(tasks_dir).st_mtime_ns
    except OSError:
        return None
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    if len(lines) < 2 and size > len(tail):
        return None  # a seal longer than the tail: the whole index is read instead
    try:
        mark = json.loads(lines[-1])
    except ValueError:
        return None
    if not isinstance(mark, dict) or mark.get("dir") != dir_mtime \
            or not isinstance(mark.get("read"), list):
        return None
    last, at = mark.get("last"), mark.get("at")
    return Newest(last if isinstance(last, str) else None,
                  float(at) if isinstance(at, (int, float)) else 0.0,
                  [task_id for task_id in mark["read"] if isinstance(task_id, str)])


def seal(tasks_dir: Path, checked: Listing, read: dict[str, Summary]) -> None:
    """After a listing that checked every file: index the tasks it read, then seal; best effort.

    `read` holds the summaries of the task files read (those without a log get
    their line); indexed tasks whose file is gone get a removal line. The seal
    follows only when `tasks/` is still as the listing saw it, has been for
    `SETTLE` seconds, and the index existed (creating it changes `tasks/`: a
    missing index is rebuilt by one listing and sealed by the next).
    """
    mtime = checked.dir_mtime
    if mtime is None:
        return
    lines = [_line(task_id, summary, checked.stamps.get(task_id))
             for task_id, summary in read.items() if task_id not in checked.logs]
    lines += [_line(task_id, None, None) for task_id in checked.missing]
    refreshed = {task_id for task_id in read if task_id not in checked.logs}
    mark: dict[str, Any] = {"dir": mtime, "read": sorted(set(checked.unread) - refreshed)}
    newest = max([(row[UPDATED] or 0.0, row[ID]) for row in checked.trusted] +
                 [(read[task_id].get("updated_at") or 0.0, task_id) for task_id in refreshed],
                 default=None)
    if newest is not None:  # `resume last` reads it from the index's tail
        mark["at"], mark["last"] = newest
    settled = time.time_ns() - mtime >= SETTLE * 1e9
    if not lines and not settled:
        return
    with contextlib.suppress(OSError, TimeoutError), _locked(tasks_dir):
        if settled and (tasks_dir / NAME).exists() and os.stat(tasks_dir).st_mtime_ns == mtime:
            lines.append((json.dumps(mark, separators=(",", ":")) + "\n").encode())
        if lines:
            _append(tasks_dir, b"".join(lines))
