"""What the child does between fork and exec: namespaces, private mounts, read-only binds, Landlock.

Everything here is prepared in the parent (paths encoded, mount flags read, the
ruleset filled, descriptors opened) so the child makes only syscalls and short
writes to /proc. The child then starts the program under a reaper (see
`normalize.sandbox.reaper`): PID 1 of a new PID namespace, or a subreaper.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from normalize.sandbox.landlock import ACCESS_READ, granter, libc, restrictor
from normalize.sandbox.reaper import Supervisor
from normalize.sandbox.seccomp import installer

__all__ = ["ChildPlan"]

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
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


PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER = 47, 3
CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON = 19, 21, 38
_DROPPED = (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON)
_CAP_VERSION_3 = 0x20080522


def ptrace_dropper() -> Callable[[], None]:
    """A function for the program's process: CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON out
    of every capability set.

    With any of them, a program run as root (CI containers) reads any process's
    `/proc/PID/environ`, `maps` and `fd` links, normalize's own included, which Landlock's
    ptrace rule (a program reaches only processes of its own domain) otherwise refuses
    (measured on Linux 6.18). The bounding set keeps them from coming back at exec; a root
    process that cannot drop them from there while holding them is refused.
    """
    c = libc()
    prctl, capget, capset = c.prctl, c.capget, c.capset
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice (caps 0-31, 32-)
    bits = sum(1 << cap for cap in _DROPPED)

    def drop() -> None:
        for cap in _DROPPED:
            if prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and prctl(
                    PR_CAPBSET_READ, cap, 0, 0, 0) == 1 and os.getuid() == 0:
                raise OSError(ctypes.get_errno(), f"capability {cap} stays in the bounding set")
            prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0)
        _check(capget(header, data))
        if (data[0] | data[1] | data[2]) & bits:
            for index in range(3):
                data[index] &= ~bits
            _check(capset(header, data))

    return drop


def mount_flags(path: str) -> int:
    """The flags of the mount holding `path` that a read-only remount must carry over."""
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEEP if flags & st)


def _check(result: int) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _unshare(unshare: Callable[[ctypes.c_int], int], flags: int) -> None:
    """`unshare(flags)`, waiting out a thread that is ending.

    A user namespace is refused (EINVAL) to a process with more than one thread. A forked
    child has one, unless a library's at-fork handler started another there for a moment
    (OpenTelemetry's resource detection did, on a pool it then joined): while the child
    still has another thread, it waits and tries again, for at most about 0.2 s.
    """
    for tries in range(40, 0, -1):
        if unshare(ctypes.c_int(flags)) == 0:
            return
        err = ctypes.get_errno()
        if tries == 1 or err != errno.EINVAL or not flags & CLONE_NEWUSER or _threads() < 2:
            raise OSError(err, os.strerror(err))
        time.sleep(0.005)


def _threads() -> int:
    """How many threads this process has now (from /proc: the kernel's count)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


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
    """The steps for the child, in order: unshare, map ids, private mounts, bind back,
    bind read-only, hide, then fork the program under a reaper, which restricts itself
    (capabilities that read other processes dropped, Landlock, then the landlock tier's
    seccomp filter, then the write guard's)."""

    unshare: int = 0
    read_only: list[tuple[bytes, int]] = field(default_factory=list)  # path, kept flags
    private_tmpfs: list[bytes] = field(default_factory=list)
    """Directories that get an empty, writable tmpfs of their own (/dev/shm, /tmp)."""
    masked: list[bytes] = field(default_factory=list)
    """Directories replaced by an empty tmpfs no Landlock rule covers (/tmp, /run: sockets).

    No rule is granted there: one would cover what is bound back beneath too."""
    keep: list[bytes] = field(default_factory=list)
    """Paths under a private or masked directory bound back in (the workspace, TMPDIR)."""
    hide: list[bytes] = field(default_factory=list)
    """Directories covered by an empty, unreadable, read-only tmpfs (normalize's own data)."""
    tmpfs_access: int = 0
    """What the Landlock ruleset allows beneath each private tmpfs."""
    ruleset_fd: int = -1
    proxy_channel: socket.socket | None = None
    """Where the loopback listener goes (the parent's proxy), for `network = [hosts]`."""
    proxy_port: int = 0
    seccomp: bytes = b""
    """A seccomp-BPF program installed last (the landlock tier's), or none."""
    pid_namespace: bool = True
    """PID 1 of a new PID namespace reaps the program (needs CLONE_NEWUSER in `unshare`);
    otherwise a child subreaper does, which needs no namespace."""
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    supervisor: Supervisor | None = None
    guard: Callable[[], None] | None = None
    """Installed last, after any seccomp filter: the write guard's filter (both tiers)."""

    def preexec(self) -> Callable[[], None]:
        c = libc()
        unshare, mount = c.unshare, c.mount  # looked up before the fork, not after
        restrict = restrictor()
        grant = granter(self.tmpfs_access) if self.ruleset_fd >= 0 else None
        grant_read = granter(self.tmpfs_access & ACCESS_READ) if self.ruleset_fd >= 0 else None
        in_namespace = self.pid_namespace and bool(self.unshare & CLONE_NEWUSER)
        flags = self.unshare | (CLONE_NEWPID if in_namespace else 0)
        self.supervisor = supervisor = Supervisor(pid_namespace=in_namespace)
        if grant_read is not None:  # a new mount is a hierarchy no rule made before covers
            supervisor.proc_mounted = partial(grant_read, self.ruleset_fd, b"/proc")
        flags_open = os.O_PATH | os.O_CLOEXEC
        install = installer(self.seccomp) if self.seccomp else None
        no_ptrace = ptrace_dropper()

        def program() -> None:
            try:
                no_ptrace()
                if self.ruleset_fd >= 0:
                    restrict(self.ruleset_fd)
                if install is not None:
                    install()
                if self.guard is not None:
                    self.guard()
            except OSError as exc:  # said to the parent, which only hears "preexec_fn failed"
                supervisor.report.refuse(f"restricting the program: {exc}")
                raise

        doing = ["starting"]  # the step under way, named to the parent if it fails

        def apply() -> None:
            try:
                steps()
            except OSError as exc:
                if not supervisor.report.refusal():  # the program's own restriction said it
                    supervisor.report.refuse(f"{doing[0]}: {exc.strerror or exc}")
                raise

        def steps() -> None:
            supervisor.orphan_guard()
            cwd = os.getcwd()  # set before this runs; re-entered below, in the new mounts
            if flags:
                doing[0] = f"making the namespaces (unshare {flags:#x})"
                _unshare(unshare, flags)
                doing[0] = "mapping the user and group ids"
                _write("/proc/self/uid_map", f"{self.uid} {self.uid} 1\n")
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/gid_map", f"{self.gid} {self.gid} 1\n")
            if self.proxy_channel is not None:  # in the program's network namespace
                doing[0] = "passing the proxy its listener"
                _pass_listener(self.proxy_channel, self.proxy_port)
            doing[0] = "opening the paths kept"
            kept = [(path, os.open(path, flags_open)) for path in self.keep]  # in this namespace
            for path in self.private_tmpfs:
                doing[0] = f"mounting a private {os.fsdecode(path)}"
                _check(mount(b"tmpfs", path, b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                             b"mode=1777"))
                if grant is not None:
                    grant(self.ruleset_fd, path)
            for path in self.masked:
                doing[0] = f"emptying {os.fsdecode(path)}"
                _check(mount(b"tmpfs", path, b"tmpfs", ctypes.c_ulong(_QUIET), b"mode=755"))
            for path, fd in kept:
                doing[0] = f"binding back {os.fsdecode(path)}"
                _bind_back(mount, path, fd)
            for path, keep in self.read_only:
                doing[0] = f"making {os.fsdecode(path)} read-only"
                _check(mount(path, path, None, ctypes.c_ulong(MS_BIND | MS_REC), None))
                remount = MS_REMOUNT | MS_BIND | MS_RDONLY | keep
                _check(mount(None, path, None, ctypes.c_ulong(remount), None))
            for path in self.hide:
                doing[0] = f"hiding {os.fsdecode(path)}"
                _check(mount(b"tmpfs", path, b"tmpfs", ctypes.c_ulong(_QUIET | MS_RDONLY),
                             b"mode=000"))
            os.chdir(cwd)
            doing[0] = "starting the reaper"
            supervisor.start(program)

        return apply

    def refusal(self) -> str:
        """Why the child could not set the sandbox up, as it said, or ""."""
        return self.supervisor.report.refusal() if self.supervisor is not None else ""

    def leftovers(self) -> int:
        """How many processes the program left running that had to be killed."""
        found = self.supervisor.report.read() if self.supervisor is not None else None
        return found[1] if found else 0

    def close(self) -> None:
        """Free the report shared with the child."""
        if self.supervisor is not None:
            self.supervisor.report.close()


_QUIET = MS_NOSUID | MS_NODEV | MS_NOEXEC


def _bind_back(mount: Callable[..., int], path: bytes, fd: int) -> None:
    """Bind what `fd` names (opened before its parent was covered) at `path` again."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    _check(mount(f"/proc/self/fd/{fd}".encode(), path, None, ctypes.c_ulong(MS_BIND | MS_REC),
                 None))
    os.close(fd)
