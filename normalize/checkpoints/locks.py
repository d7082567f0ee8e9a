"""Git lock files a dead process left in the shadow store, found and cleared.

git takes `index.lock` (and `packed-refs.lock`, a ref's `.lock`, ...) by
creating the file and keeps it open until it renames it into place. A kill of
the process group in between (a CI cancel, `timeout -s KILL`) leaves the file
behind, and every later git write in the store fails on it.

A lock is judged stale only when both hold:

- the caller holds the workspace's checkpoint lock (an `flock`, which the
  kernel drops when its holder dies), and every normalize process runs its
  git writes under it: so no live normalize is in the middle of one;
- no live process has the lock file open (read from `/proc/*/fd`): so the git
  that made it is gone too, even one that outlived its normalize.

Where `/proc` cannot be read (not Linux), a lock older than `OLD` counts as
stale instead. Pids are never compared, so a reused pid cannot fool it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["OLD", "clear_stale", "git_locks", "held_open"]

OLD = 600.0  # seconds: the fallback judgement where open files cannot be listed


def git_locks(root: Path, git_dir: Path) -> list[Path]:
    """The `*.lock` files git may leave: beside the index, in the git dir and under refs."""
    found = [*root.glob("*.lock"), *git_dir.glob("*.lock")]
    refs = git_dir / "refs"
    if refs.is_dir():
        found += refs.rglob("*.lock")
    return [p for p in found if p.is_file()]


def held_open(paths: list[Path]) -> set[Path] | None:
    """Which of `paths` some live process has open; None when that cannot be known here."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    wanted = {os.path.realpath(p): p for p in paths}
    held: set[Path] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target in wanted:
                        held.add(wanted[target])
    return held


def clear_stale(root: Path, git_dir: Path, now: float | None = None) -> list[Path]:
    """Remove the git locks no live process holds; the ones removed.

    Call it only while holding the workspace's checkpoint lock (see the module).
    """
    locks = git_locks(root, git_dir)
    if not locks:
        return []
    held = held_open(locks)
    now = time.time() if now is None else now
    cleared: list[Path] = []
    for lock in locks:
        if held is not None and lock in held:
            continue
        with contextlib.suppress(OSError):
            if held is None and now - lock.stat().st_mtime < OLD:
                continue
            lock.unlink()
            cleared.append(lock)
    return cleared
