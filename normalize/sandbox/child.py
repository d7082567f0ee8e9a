"""What the child does between fork and exec: namespaces, private mounts, read-only binds, Landlock.

Everything here is prepared in the parent (paths encoded, mount flags read, the
ruleset filled) so the child makes only syscalls and short writes to /proc.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
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
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40
_LO_UP = struct.pack("16sH14x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING)  # struct ifreq
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


def _pass_listener(channel: socket.socket, port: int) -> None:
    """Bring up this namespace's loopback, listen on `port` there, send the listener back.

    The parent's proxy accepts on it: the program's only way out of its network
    namespace (see `normalize.sandbox.proxy`). Our copy closes before exec.
    """
    control = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(control.fileno(), SIOCSIFFLAGS, _LO_UP)
    finally:
        control.close()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        socket.send_fds(channel, [b"L"], [listener.fileno()])
    finally:
        listener.close()


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
    proxy_channel: socket.socket | None = None
    """Where the loopback listener goes (the parent's proxy), for `network = [hosts]`."""
    proxy_port: int = 0
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
            if self.proxy_channel is not None:
                _pass_listener(self.proxy_channel, self.proxy_port)
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
