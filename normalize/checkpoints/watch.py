"""Whether anything in a workspace changed since a moment, from the kernel (inotify).

A side effect's checkpoint counts only what changed during it, so the
workspace is recorded just before it too — a second scan as costly as the
one after. When nothing changed since the last recording, the tree just
before is that recording's, and the scan can be skipped. This watch says so:
inotify watches on every directory of the workspace (not `.git` or
`.normalize`, which checkpoints never store), drained as each recording
starts; any event since, a lost event (the queue overflowed) or a watch it
could not add says "changed", so a doubt always costs the scan, never the
exactness of a step.

Only where the kernel sees every change: Linux, a local file system (a
network one changes under it unseen), a tree within `MAX_DIRS` directories
and the user's watch limit. Elsewhere `arm` says no and each side effect is
scanned before, as without the watch. (A write through a shared memory map
raises no event; the scan after the action still records it, as the
action's.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import sys
from pathlib import Path

MAX_DIRS = 50_000
SKIP = frozenset({".git", ".normalize"})
LOCAL = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs",
                   "bcachefs", "reiserfs", "jfs"})

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_ISDIR, IN_ONLYDIR, IN_DONT_FOLLOW = 0x4000, 0x40000000, 0x1000000, 0x2000000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
EVENT = struct.Struct("iIII")


class ChangeWatch:
    """inotify over a workspace's directories: `drain` at a recording, `changed` since it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd: int | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._doubt = False  # an event was lost or a watch could not be added

    @property
    def armed(self) -> bool:
        return self._fd is not None

    def arm(self) -> bool:
        """Watch every directory of the workspace; False (and nothing held) where it cannot."""
        if self._fd is not None:
            return True
        if not sys.platform.startswith("linux") or fs_type(self.root) not in LOCAL:
            return False
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return False
        self._fd, self._libc, self._doubt = fd, libc, False
        if not self._add_tree(os.fsdecode(self.root)) or self._doubt:
            self.close()
            return False
        return True

    def drain(self) -> bool:
        """Read what happened since the last drain (watching new directories); whether anything
        did. A lost event disarms the watch (`arm` again): directories made then are unwatched."""
        if self._fd is None:
            return True
        seen = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self._doubt = True
                break
            seen = True
            self._read(data)
        if self._doubt:
            self.close()
        return seen

    def close(self) -> None:
        fd, self._fd = self._fd, None
        self._dirs = {}
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:  # a recorder dropped unclosed gives its inotify instance back
        self.close()

    def _read(self, data: bytes) -> None:
        at = 0
        while at + EVENT.size <= len(data):
            wd, mask, _cookie, size = EVENT.unpack_from(data, at)
            name = data[at + EVENT.size:at + EVENT.size + size].split(b"\0", 1)[0]
            at += EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                self._doubt = True
            elif mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and wd in self._dirs:
                self._add_tree(os.path.join(self._dirs[wd], os.fsdecode(name)))

    def _add_tree(self, top: str) -> bool:
        """Watch `top` and the directories beneath it; False past `MAX_DIRS`."""
        stack = [top]
        while stack:
            directory = stack.pop()
            if len(self._dirs) >= MAX_DIRS:
                self._doubt = True
                return False
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), MASK)
            if wd < 0:
                if ctypes.get_errno() not in (2, 20):  # gone, or no longer a directory: it
                    self._doubt = True                 # changed, and its event says so
                continue
            self._dirs[wd] = directory
            with contextlib.suppress(OSError), os.scandir(directory) as scan:
                stack.extend(entry.path for entry in scan
                             if entry.name not in SKIP and entry.is_dir(follow_symlinks=False))
        return True


def fs_type(path: Path) -> str:
    """The file system type of the mount holding `path` (from /proc/self/mountinfo), or ''."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not right:
                    continue
                point = fields[4].replace("\\040", " ").replace("\\011", "\t") \
                    .replace("\\012", "\n").replace("\\134", "\\")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, right.split()[0]
    except OSError:
        return ""
    return kind
