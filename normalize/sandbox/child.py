"""What the child does between fork and exec: namespaces, private mounts, read-only binds, Landlock.

Everything here is prepared in the parent (paths encoded, mount flags read, the
ruleset filled) so the child makes only syscalls and short writes to /proc.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from normalize.sandbox.landlock import granter, libc, restrictor
from normalize.sandbox.seccomp import installer

__all__ = ["ChildPlan"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_RELATIME = 1 << 21
# statvfs f_flag bits → mount flags a remount must keep (the kernel locks them)
_KEEP = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
         (os.ST_RELATIME, MS_RELATIME))


def mount_flags(path: str) -> int:
    """The flags of the mount holding `path` that a read-only remount must carry over."""
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEEP if flags & st)


def _check(result: int) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


@dataclass
class ChildPlan:
    """The steps for the child, in order: unshare, map ids, bind read-only, restrict, filter."""

    unshare: int = 0
    read_only: list[tuple[bytes, int]] = field(default_factory=list)  # path, kept flags
    private_tmpfs: list[bytes] = field(default_factory=list)
    """Directories that get an empty tmpfs of their own (shared ones, such as /dev/shm)."""
    tmpfs_access: int = 0
    """What the Landlock ruleset allows beneath each private tmpfs."""
    ruleset_fd: int = -1
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    seccomp: bytes = b""
    """A seccomp-BPF program installed last (the landlock tier's), or none."""

    def preexec(self) -> Callable[[], None]:
        c = libc()
        unshare, mount = c.unshare, c.mount  # looked up before the fork, not after
        restrict = restrictor()
        grant = granter(self.tmpfs_access) if self.private_tmpfs else None
        install = installer(self.seccomp) if self.seccomp else None

        def apply() -> None:
            if self.unshare:
                _check(unshare(ctypes.c_int(self.unshare)))
                _write("/proc/self/uid_map", f"{self.uid} {self.uid} 1\n")
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/gid_map", f"{self.gid} {self.gid} 1\n")
            for path in self.private_tmpfs:
                _check(mount(b"tmpfs", path, b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                             b"mode=1777"))
                if grant is not None and self.ruleset_fd >= 0:
                    grant(self.ruleset_fd, path)
            for path, keep in self.read_only:
                _check(mount(path, path, None, ctypes.c_ulong(MS_BIND | MS_REC), None))
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY | keep
                _check(mount(None, path, None, ctypes.c_ulong(flags), None))
            if self.ruleset_fd >= 0:
                restrict(self.ruleset_fd)
            if install is not None:
                install()

        return apply
