"""Landing a child's diff in the parent's workspace whole or not at all (ENOSPC, SIGKILL).

`isolate.plan` says each touched path's new content (`Move`s). `land` writes
the intent first (`merge.json` beside the child's copy: each rename and
removal, and the directories it will make) as `staging`, stages every new
content beside its target (same directory, a temporary name, fsynced), then
writes the intent again as `staged`: that is the commit point. The removals
and renames follow, each one idempotent, then the intent goes. A failure
while staging (a full disk) takes back what was staged and the directories
made for it, and raises `MergeError`: nothing of the change is left.

`settle` finishes what a killed `land` left: a `staged` intent is completed
(the renames not yet done are done), a `staging` one is rolled back. The
spawner settles before it applies, so a resumed parent never applies a diff
on top of half of it. Every path is opened beneath the workspace's
descriptor without following a link (`normalize.fsopen`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from normalize import fsopen
from normalize.checkpoints.shadow import CheckpointError, ShadowRepo, dot_git
from normalize.faults import armed, crash_point
from normalize.fsutil import atomic_write, fsync_directory, json_bytes
from normalize.serial import Record

__all__ = ["Intent", "MergeError", "Move", "land", "settle"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class MergeError(CheckpointError):
    """A child's changes could not be written into the workspace; none of them was."""


@dataclass
class Move:
    """One path of a landing: its new content's blob and mode ("" mode: removed)."""

    path: str
    mode: str = ""
    sha: str = ""
    tmp: str = ""  # the staged file's name in the path's directory


@dataclass
class Intent(Record):
    """A landing's journal: what it renames and removes, and the directories it makes."""

    state: Literal["staging", "staged"] = "staging"  # staged whole: the commit point
    moves: list[Move] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


def _save(path: Path, intent: Intent) -> None:
    atomic_write(path, json_bytes(intent.to_dict()), mode=0o600)  # fsynced, and its directory


def _load(path: Path) -> Intent | None:
    try:
        return Intent.from_dict(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"{path}: an unreadable merge journal ({exc})") from None


def _split(rel: str) -> tuple[list[str], str]:
    *dirs, name = rel.split("/")
    return dirs, name


def _missing_dirs(workspace: Path, moves: list[Move]) -> list[str]:
    """The directories staging will make (shallowest first)."""
    made: dict[str, None] = {}
    for move in moves:
        dirs, _ = _split(move.path)
        for depth in range(1, len(dirs) + 1):
            rel = "/".join(dirs[:depth])
            if rel not in made and not os.path.lexists(workspace / rel):
                made[rel] = None
    return list(made)


def land(repo: ShadowRepo, moves: list[Move], journal: Path) -> None:
    """Write `moves` into the workspace whole, or raise `MergeError` having written nothing."""
    workspace = repo.workspace
    for move in moves:
        if dot_git(move.path) or ".normalize" in move.path.split("/"):
            raise MergeError(f"refusing to write {move.path!r}: a protected path")
        if move.mode:
            move.tmp = f".{_split(move.path)[1][:180]}.{os.urandom(4).hex()}.normalize-merge"
    intent = Intent(moves=moves, dirs=_missing_dirs(workspace, moves))
    try:
        _save(journal, intent)
        crash_point("merge_intent")
        blobs = repo.blobs(m.sha for m in moves if m.mode)
        for move in moves:
            if move.mode:
                _stage(workspace, move, blobs[move.sha])
        _sync_dirs(workspace, moves)
        intent.state = "staged"
        _save(journal, intent)
    except (OSError, CheckpointError) as exc:
        _roll_back(workspace, intent)
        journal.unlink(missing_ok=True)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise MergeError(f"nothing of it was written: {why}") from None
    crash_point("merge_staged")
    _roll_forward(workspace, intent)
    journal.unlink(missing_ok=True)


def settle(workspace: Path, journal: Path) -> bool:
    """Finish a landing a killed process left: True when it was completed (it was staged
    whole), False when there was none or it was rolled back (nothing of it is left)."""
    intent = _load(journal)
    if intent is None:
        return False
    if intent.state == "staged":
        _roll_forward(workspace, intent)
    else:
        _roll_back(workspace, intent)
    journal.unlink(missing_ok=True)
    return intent.state == "staged"


def _stage(workspace: Path, move: Move, data: bytes) -> None:
    """The new content beside its target, complete and fsynced, under its temporary name."""
    dirs, _ = _split(move.path)
    with fsopen.open_dir(workspace, dirs, create=True) as dfd:
        if move.mode == "120000":
            os.symlink(os.fsdecode(data), move.tmp, dir_fd=dfd)
            return
        mode = 0o777 if move.mode == "100755" else 0o666  # the umask applies, as git's does
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
        fd = os.open(move.tmp, flags, mode, dir_fd=dfd)
        with os.fdopen(fd, "wb") as fh:
            half = len(data) // 2 if armed("merge_stage") else len(data)
            fh.write(data[:half])
            fh.flush()
            crash_point("merge_stage")
            fh.write(data[half:])
            fh.flush()
            os.fsync(fh.fileno())


def _sync_dirs(workspace: Path, moves: list[Move]) -> None:
    for folder in dict.fromkeys(os.path.dirname(m.path) for m in moves):
        fsync_directory(workspace / folder)


def _roll_forward(workspace: Path, intent: Intent) -> None:
    """Removals, then renames; what stops them is a `MergeError` (the journal stays: the
    next settle goes on from there)."""
    try:
        _renames(workspace, intent)
    except OSError as exc:
        raise MergeError(f"{exc.filename or 'the workspace'}: {exc.strerror or exc}; the rest "
                         f"of the merge is staged and waits for a resume") from None


def _renames(workspace: Path, intent: Intent) -> None:
    """Removals first (a directory a removal empties may be a file's name next)."""
    for move in intent.moves:
        if not move.mode:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                fsopen.remove(workspace, move.path)
            crash_point("merge_rename")
    for move in intent.moves:
        if move.mode:
            dirs, name = _split(move.path)
            with fsopen.open_dir(workspace, dirs) as dfd:
                try:
                    os.replace(move.tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                except FileNotFoundError:
                    pass  # renamed before the last process stopped
                except IsADirectoryError:
                    raise MergeError(f"{move.path} is a directory now; its new content waits "
                                     f"beside it as {move.tmp}") from None
            crash_point("merge_rename")
    _sync_dirs(workspace, intent.moves)


def _roll_back(workspace: Path, intent: Intent) -> None:
    """Remove what staging left: the temporary files, then the directories it made."""
    for move in intent.moves:
        if move.tmp:
            dirs, _ = _split(move.path)
            with contextlib.suppress(OSError):
                fsopen.remove(workspace, "/".join([*dirs, move.tmp]), prune=False)
    for rel in reversed(intent.dirs):
        dirs, name = _split(rel)
        with contextlib.suppress(OSError), fsopen.open_dir(workspace, dirs) as dfd:
            os.rmdir(name, dir_fd=dfd)
