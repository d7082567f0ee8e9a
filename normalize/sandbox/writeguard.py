"""The landlock tier's prevention: a seccomp user-notification supervisor decides every path change.

Landlock cannot say "the workspace except every `.git`": its rules allow a
hierarchy, never take a part of one back; and the full tier's read-only binds
hold only the repositories that exist when a program starts. So in both tiers
the program installs, last before `exec`, a filter that hands each
path-changing call to normalize (`open`/`openat`/`creat` with a write, create
or truncate flag, `truncate`, `unlink*`, `rmdir`, `rename*`, `mkdir*`,
`mknod*`, `symlink*`, `link*`, `chmod`, `fchmod`, `fchmodat*`, `utimensat`
(with a path or on a descriptor), the `chown` family (but a chown to the
caller's own ids, which changes no owner: `tar` run as root makes one per
file), `setxattr` and `removexattr` with their `l` and `f` forms). A thread in normalize
(`WriteGuard`) reads the call's paths once from the caller's memory, resolves
them as the caller would (from its root, cwd or directory descriptor, through
`/proc/PID/...`: in the full tier that is the program's own mount namespace),
and decides against `Protection`: the places programs may write (the
workspace, their temp dir, a few devices) minus every `.git` and `.normalize`
at any depth (any spelling: `.GIT`, `.Git`, since a case-insensitive file
system the tree is later copied to makes it the repository) and the hidden
places (the data home, harness homes, credential stores). A refused call
returns EACCES, as Landlock's own refusals do.

An allowed call is *performed by normalize*, never let through: the caller's
parent directory is opened (`O_PATH`) and its real path checked, the final
name is checked, and the call is made relative to that descriptor with the
final symlink never followed (a symlink is read and its target resolved and
checked the same way, up to 40 times). An open's descriptor is installed in
the caller with `SECCOMP_IOCTL_NOTIF_ADDFD` (atomically answering it), so
nothing can change between the check and the use: not the caller's memory
(another thread), not a symlink, not a directory renamed meanwhile (renaming
into or out of a protected place is itself refused). Created files and
directories get the caller's mode under the caller's umask. Only `user.`
extended attributes are set this way: an ACL, a file capability or a security
label set by normalize would carry normalize's rights (outside the program's
user namespace, in the full tier), so those answer EPERM. Every allowed change
is made with normalize's rights: in the full tier, with normalize run as root,
that is wider than what the program's user namespace maps (a file of another
uid in the workspace, an owner of any uid), though only where the program may
write.

Kept from the program: `openat2` (ENOSYS: the C library falls back to
`openat`), `utime`/`utimes`/`futimesat` (ENOSYS; the C library uses
`utimensat`), `setxattrat`/`removexattrat`/`file_setattr` (ENOSYS), inode
flags through `ioctl` (`chattr`: FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, EPERM)
and a new seccomp listener of its own (EPERM: a later filter's listener would
be asked first, and could let a call through unasked). A foreign
architecture's call kills the program and an x32 call answers ENOSYS, so the
filter holds where it is the only one (the full tier).

Not decided here: a file that was already a hard link of a protected file
before the program started (its other name is not protected). The calls
themselves are in `normalize.sandbox.guardcalls`. `.git` fingerprints
(`normalize.sandbox.gitguard`) stay, as the detector of last resort.

Why this and not the alternatives (measured in `bench/sandbox.py`): another
uid needs normalize to run as root (CI containers only) and a tree owned by
someone else; a snapshot of every protected path is a repair, after the fact,
that a survivor or a second task can race. A notification costs a round trip
through normalize per path change (0.1-0.3 ms on a loaded 2-core machine, most
of it the caller being woken to take its descriptor); reads, and writes
through an open descriptor, cost nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import select
import socket
import struct
import threading

from normalize.sandbox.guardcalls import (
    AT_FDCWD,
    HANDLERS,
    HOPS,
    PROTECTED_SPELLINGS,
    Call,
    Gone,
    Protection,
    Refused,
    beneath,
    own_fd,
    umask_in,
)
from normalize.sandbox.landlock import PR_SET_NO_NEW_PRIVS
from normalize.sandbox.seccomp import ARCHES, _Program, arch

__all__ = ["PROTECTED_SPELLINGS", "Protection", "WriteGuard", "guard_filter"]

# name -> (x86_64, aarch64); -1 where the machine has no such call
_NR = {
    "open": (2, -1), "openat": (257, 56), "creat": (85, -1), "truncate": (76, 45),
    "rename": (82, -1), "renameat": (264, 38), "renameat2": (316, 276), "unlink": (87, -1),
    "unlinkat": (263, 35), "rmdir": (84, -1), "mkdir": (83, -1), "mkdirat": (258, 34),
    "link": (86, -1), "linkat": (265, 37), "symlink": (88, -1), "symlinkat": (266, 36),
    "mknod": (133, -1), "mknodat": (259, 33), "chmod": (90, -1), "fchmod": (91, 52),
    "fchmodat": (268, 53), "fchmodat2": (452, 452), "utimensat": (280, 88),
    "chown": (92, -1), "fchown": (93, 55), "lchown": (94, -1), "fchownat": (260, 54),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7),
    "removexattr": (197, 14), "lremovexattr": (198, 15), "fremovexattr": (199, 16),
}
_ENOSYS = {"openat2": (437, 437), "utime": (132, -1), "utimes": (235, -1),
           "futimesat": (261, -1), "setxattrat": (463, 463), "removexattrat": (466, 466),
           "file_setattr": (469, 469)}
_SECCOMP = (317, 277)
_IOCTL = (16, 29)
_SET_FLAGS = (0x40086602, 0x40046602, 0x401C5820)
"""FS_IOC_SETFLAGS (and its 32-bit spelling), FS_IOC_FSSETXATTR: `chattr`, refused (EPERM)."""
_OPEN_FLAGS = {"open": 1, "openat": 2}  # which argument holds an open's flags
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_RET_ALLOW, _RET_NOTIFY, _RET_ERRNO = 0x7FFF0000, 0x7FC00000, 0x00050000
_RET_KILL_PROCESS = 0x80000000
_X32 = 0x40000000
_SECCOMP_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER = 1 << 3
_FLAG_WAIT_KILLABLE_RECV = 1 << 5  # Linux 5.19: a signal no longer restarts a call we answer
_RECV, _SEND, _ID_VALID, _ADDFD = 0xC0502100, 0xC0182101, 0x40082102, 0x40182103
_ADDFD_SEND = 1 << 1
_NOTIF = struct.Struct("=QII iIQ6Q")
_RESP = struct.Struct("=QqiI")
_ADDFD_ARGS = struct.Struct("=QIIII")
_PATH_MAX = 4096
_SELF = re.compile(rb"^/proc/(?:self|thread-self)(?=/|$)")


def _numbers(machine: str) -> tuple[int, dict[str, int], dict[str, int]]:
    column = 0 if machine == "x86_64" else 1
    decided = {name: nrs[column] for name, nrs in _NR.items() if nrs[column] >= 0}
    enosys = {name: nrs[column] for name, nrs in _ENOSYS.items() if nrs[column] >= 0}
    return column, decided, enosys


def guard_filter(machine: str | None = None) -> bytes:
    """The BPF program: notify for path changes, refuse the calls named above, allow the rest.

    It holds alone (the full tier installs no other filter): a foreign architecture is
    killed and x32 calls refused, as the landlock tier's sandbox filter does before it.
    """
    machine = machine or arch()
    if machine is None:
        raise OSError("no seccomp filter for this machine")
    column, decided, enosys = _numbers(machine)
    prog = _Program()
    prog.load(4)
    prog.jeq(ARCHES[machine], 0, "kill")  # i386 on x86_64: other numbers, undecided
    prog.load(0)
    if machine == "x86_64":
        prog.jset(_X32, "enosys", 0)  # x32: the same calls under other numbers
    for name in _OPEN_FLAGS:
        if name in decided:
            prog.jeq(decided[name], f"{name}_flags", 0)
    for name, nr in decided.items():
        if name in _OWNER_ARGS:
            prog.jeq(nr, f"{name}_owner", 0)
        elif name not in _OPEN_FLAGS:
            prog.jeq(nr, "notify", 0)
    for nr in enosys.values():
        prog.jeq(nr, "enosys", 0)
    prog.jeq(_IOCTL[column], "ioctl", 0)
    prog.jeq(_SECCOMP[column], "seccomp", "allow")
    prog.label("ioctl")  # inode flags (immutable, append-only) through a descriptor
    prog.load(16 + 8 * 1)
    for request in _SET_FLAGS:
        prog.jeq(request, "eperm", 0)
    prog.ret(_RET_ALLOW)
    for name, arg in _OPEN_FLAGS.items():
        if name in decided:
            prog.label(f"{name}_flags")
            prog.load(16 + 8 * arg)
            prog.jset(_WRITE_FLAGS, "notify", "allow")
    _own_owner(prog, decided, os.getuid(), os.getgid())
    prog.label("seccomp")  # a listener of the program's own would be asked before ours
    prog.load(16 + 8 * 1)
    prog.jset(_FLAG_NEW_LISTENER, "eperm", "allow")
    prog.label("allow")
    prog.ret(_RET_ALLOW)
    prog.label("notify")
    prog.ret(_RET_NOTIFY)
    prog.label("enosys")
    prog.ret(_RET_ERRNO | errno.ENOSYS)
    prog.label("eperm")
    prog.ret(_RET_ERRNO | errno.EPERM)
    prog.label("kill")
    prog.ret(_RET_KILL_PROCESS)
    return prog.assemble()


_OWNER_ARGS = {"chown": 1, "fchown": 1, "lchown": 1, "fchownat": 2}
"""Where each chown call's uid lies (its gid next)."""
_UNCHANGED = 0xFFFFFFFF  # (uid_t)-1


def _own_owner(prog: _Program, decided: dict[str, int], uid: int, gid: int) -> None:
    """A chown to the caller's own ids (or -1: unchanged) is let through unasked: it changes
    no owner (`tar` run as root gives every file it makes to root); any other is asked."""
    for name, arg in _OWNER_ARGS.items():
        if name not in decided:
            continue
        prog.label(f"{name}_owner")
        prog.load(16 + 8 * arg)
        prog.jeq(uid, f"{name}_group", 0)
        prog.jeq(_UNCHANGED, f"{name}_group", "notify")
        prog.label(f"{name}_group")
        prog.load(16 + 8 * (arg + 1))
        prog.jeq(gid, "allow", 0)
        prog.jeq(_UNCHANGED, "allow", "notify")


class WriteGuard:
    """One program's supervisor: `preexec` in the program, a thread in normalize until `stop`.

    Also what `normalize.sandbox.writes.Tracer` is for the checkpoints: `paths` holds every
    absolute path the program changed, `refused` every one it was refused.
    """

    def __init__(self, protection: Protection) -> None:
        self.protection = protection
        self.usable = True
        self.paths: set[str] = set()
        self.refused: list[str] = []
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._parent.set_inheritable(False)
        self._listener = -1
        self._mems: dict[int, int] = {}
        self._statuses: dict[int, int] = {}  # pid -> its /proc/PID/status, open
        self._stop_r, self._stop_w = os.pipe()
        self._lock = threading.Lock()
        c = ctypes.CDLL(None, use_errno=True)  # its own: argtypes set here stay here
        self._syscall, self._ioctl = c.syscall, c.ioctl
        self._ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        self._syscall.restype = ctypes.c_long
        self._renameat2 = (_NR["renameat2"][0 if arch() == "x86_64" else 1])
        self._utimensat = (_NR["utimensat"][0 if arch() == "x86_64" else 1])
        self._fchownat = (_NR["fchownat"][0 if arch() == "x86_64" else 1])
        program = guard_filter()
        self._prog_buf = ctypes.create_string_buffer(program, len(program))
        self._fprog_buf = ctypes.create_string_buffer(
            struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(self._prog_buf)))
        self._sys_seccomp = _SECCOMP[0 if arch() == "x86_64" else 1]
        self._prctl = c.prctl
        self._thread = threading.Thread(target=self._run, name="write-guard", daemon=True)
        self._thread.start()

    # -- in the program, last before exec ---------------------------------------------------

    def preexec(self) -> None:
        """Install the filter and hand its listener to normalize; OSError when it cannot."""
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        fd = -1
        for flags in (_FLAG_NEW_LISTENER | _FLAG_WAIT_KILLABLE_RECV, _FLAG_NEW_LISTENER):
            fd = self._syscall(ctypes.c_long(self._sys_seccomp),
                               ctypes.c_long(_SECCOMP_SET_MODE_FILTER), ctypes.c_long(flags),
                               self._fprog_buf)
            if fd >= 0 or ctypes.get_errno() != errno.EINVAL:
                break
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"the write guard's filter: {os.strerror(err)}")
        socket.send_fds(self._child, [b"+"], [fd])
        os.close(fd)
        self._child.close()

    # -- in normalize -------------------------------------------------------------------------

    def stop(self) -> set[str]:
        """Stop deciding (later calls of any survivor fail with ENOSYS); the paths changed."""
        with self._lock:
            if self._stop_w >= 0:
                os.write(self._stop_w, b"x")
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)
        with self._lock:
            fds = [self._listener, self._stop_r, self._stop_w, *self._mems.values(),
                   *self._statuses.values()]
            self._listener = self._stop_r = self._stop_w = -1
            self._mems.clear()
            self._statuses.clear()
            for fd in fds:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._parent.close()
            self._child.close()
        return self.paths

    def start(self) -> None:
        """Nothing to do: the thread waits for the listener from the start (the Tracer's call)."""

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._parent.fileno(), select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        events = dict(poller.poll())
        if self._stop_r in events:
            return
        try:
            msg, fds, _, _ = socket.recv_fds(self._parent, 4, 1)
        except OSError:
            return
        if msg != b"+" or not fds:
            return
        self._listener = fds[0]
        self._serve()

    def _serve(self) -> None:
        column = 0 if arch() == "x86_64" else 1
        names = {nrs[column]: name for name, nrs in _NR.items() if nrs[column] >= 0}
        buf = ctypes.create_string_buffer(_NOTIF.size)
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            events = dict(poller.poll())
            if self._stop_r in events:
                return
            if not events.get(self._listener, 0) & select.POLLIN:
                return  # every process under the filter has exited
            ctypes.memset(buf, 0, _NOTIF.size)
            if self._ioctl(self._listener, _RECV, ctypes.addressof(buf)) != 0:
                if ctypes.get_errno() in (errno.EINTR, errno.ENOENT):
                    continue
                return
            ident, pid, _, nr, _, _, *args = _NOTIF.unpack(buf.raw)
            call = Call(ident, pid, names.get(nr, ""), list(args))
            self._decide(call)

    def _decide(self, call: Call) -> None:
        try:
            handler = HANDLERS.get(call.name)
            if handler is None:
                raise Refused(errno.ENOSYS)
            result = handler(self, call)
            if result is not None:
                self._answer(call.ident, 0, 0)
        except Gone:
            pass
        except Refused as refused:
            if refused.why == "protected" or (refused.why == "hidden"
                                              and not refused.path.startswith(b"/dev/")):
                self.refused.append(_shown(refused.path, self.protection.workspace))
            self._answer(call.ident, 0, -refused.code)
        except OSError as exc:
            self._answer(call.ident, 0, -(exc.errno or errno.EIO))
        except Exception:  # never let a call through on a bug: refuse it
            self._answer(call.ident, 0, -errno.EACCES)
        finally:
            call.close()

    def _answer(self, ident: int, value: int, error: int) -> None:
        resp = ctypes.create_string_buffer(_RESP.pack(ident, value, error, 0))
        self._ioctl(self._listener, _SEND, ctypes.addressof(resp))

    def _install(self, call: Call, fd: int, cloexec: bool) -> None:
        """Give the caller `fd` as the call's result (ADDFD, answering in the same step)."""
        flags = os.O_CLOEXEC if cloexec else 0
        args = ctypes.create_string_buffer(_ADDFD_ARGS.pack(call.ident, _ADDFD_SEND, fd, 0,
                                                            flags))
        if self._ioctl(self._listener, _ADDFD, ctypes.addressof(args)) >= 0:
            return
        if ctypes.get_errno() != errno.EINVAL:  # the caller is gone (ENOENT): nothing to say
            return
        args = ctypes.create_string_buffer(_ADDFD_ARGS.pack(call.ident, 0, fd, 0, flags))
        new = self._ioctl(self._listener, _ADDFD, ctypes.addressof(args))  # before Linux 5.14
        if new >= 0:
            self._answer(call.ident, new, 0)

    def _later(self, call: Call, parent: int, name: bytes, flags: int, path: bytes) -> None:
        """Open a FIFO in a thread of its own (it blocks until a reader comes), then answer."""
        later = Call(call.ident, call.pid, call.name, call.args, call.fds)
        call.fds = []

        def wait() -> None:
            try:
                fd = later.keep(os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC,
                                        dir_fd=parent))
                with self._lock:
                    if self._listener >= 0:
                        self._note(path)
                        self._install(later, fd, bool(flags & os.O_CLOEXEC))
            except OSError as exc:
                with self._lock:
                    if self._listener >= 0:
                        self._answer(later.ident, 0, -(exc.errno or errno.EIO))
            finally:
                later.close()

        threading.Thread(target=wait, name="write-guard-fifo", daemon=True).start()

    # -- reading the caller --------------------------------------------------------------------

    def _string(self, call: Call, address: int) -> bytes:
        """A path argument, read once from the caller's memory."""
        if address == 0:
            raise Refused(errno.EFAULT)
        raw = b""
        for _ in range(2):
            fd = self._mems.get(call.pid)
            try:
                if fd is None:
                    fd = self._mems[call.pid] = os.open(f"/proc/{call.pid}/mem",
                                                        os.O_RDONLY | os.O_CLOEXEC)
                raw = os.pread(fd, _PATH_MAX, address)
            except (OSError, ValueError, OverflowError):
                raw = b""
            if raw:
                break
            if fd is not None:  # a pid reused, or an unmapped page: open it afresh once
                with contextlib.suppress(OSError):
                    os.close(self._mems.pop(call.pid))
        if not raw:
            raise Refused(errno.EFAULT)
        end = raw.find(b"\0")
        if end < 0:
            raise Refused(errno.ENAMETOOLONG)
        return raw[:end]

    def umask(self, pid: int) -> int:
        """The caller's umask now (its /proc/PID/status kept open, read afresh each time)."""
        for _ in range(2):
            fd = self._statuses.get(pid)
            try:
                if fd is None:
                    fd = self._statuses[pid] = os.open(f"/proc/{pid}/status",
                                                       os.O_RDONLY | os.O_CLOEXEC)
                return umask_in(os.pread(fd, 4096, 0))
            except OSError:  # gone, or the pid reused since: open it afresh once
                with contextlib.suppress(OSError, KeyError):
                    os.close(self._statuses.pop(pid))
        return 0o022

    def _bytes(self, call: Call, address: int, size: int) -> bytes:
        fd = self._mems.get(call.pid)
        try:
            if fd is None:
                fd = self._mems[call.pid] = os.open(f"/proc/{call.pid}/mem",
                                                    os.O_RDONLY | os.O_CLOEXEC)
            raw = os.pread(fd, size, address)
        except (OSError, ValueError, OverflowError):
            raw = b""
        if len(raw) != size:
            raise Refused(errno.EFAULT)
        return raw

    def _base(self, call: Call, dirfd: int | None) -> int:
        """The caller's cwd, or its descriptor `dirfd`, opened here (O_PATH)."""
        signed = None if dirfd is None else ctypes.c_int(dirfd & 0xFFFFFFFF).value
        where = (f"/proc/{call.pid}/cwd" if signed is None or signed == AT_FDCWD
                 else f"/proc/{call.pid}/fd/{signed}")
        try:
            return call.keep(os.open(where, os.O_PATH | os.O_CLOEXEC))
        except OSError as exc:
            raise Refused(errno.EBADF if exc.errno == errno.ENOENT else exc.errno or 1) from None

    def _root(self, call: Call) -> int:
        """The caller's root directory, opened here (O_PATH)."""
        try:
            return call.keep(os.open(f"/proc/{call.pid}/root",
                                     os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            raise Refused(errno.ENOENT) from None

    def _valid(self, call: Call) -> None:
        """Still the same caller (what was read was its memory, the pid not reused)."""
        ident = ctypes.c_uint64(call.ident)
        if self._ioctl(self._listener, _ID_VALID, ctypes.addressof(ident)) != 0:
            raise Gone

    # -- resolving -----------------------------------------------------------------------------

    def _split(self, call: Call, base: int, path: bytes) -> tuple[int, bytes, bytes]:
        """(the parent directory opened here, the final name, the parent's real path)."""
        if not path:
            raise Refused(errno.ENOENT)
        own = _SELF.sub(b"/proc/%d" % call.pid, path, count=1)  # the caller's, not ours
        if own == path and path.startswith(b"/"):
            # from the caller's root: in the full tier, its own mount namespace's (its /tmp,
            # /dev/shm and read-only binds), never what the same path names in normalize's
            base, path = self._root(call), path.lstrip(b"/") or b"."
        else:
            path = own
        trimmed = path.rstrip(b"/") or b"/"
        head, _, name = trimmed.rpartition(b"/")
        if b"/" not in trimmed:
            head = b"."
        elif not head:
            head = b"/"
        if name in (b"", b".", b".."):  # the directory itself: its parent is above it
            whole = call.keep(os.open(trimmed, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                                      dir_fd=base))
            real = os.readlink(f"/proc/self/fd/{whole}".encode())
            return whole, b".", real
        parent = call.keep(os.open(head, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                                   dir_fd=base))
        return parent, name, os.readlink(f"/proc/self/fd/{parent}".encode())

    def _final(self, call: Call, parent: int, name: bytes, real: bytes,
               follow: bool) -> tuple[int, bytes, bytes] | int:
        """Follow a final symlink (when the call would), resolving each target the same way.

        Returns the last (parent, name, parent's real path), or a descriptor opened here for
        one of the caller's own descriptors named through /proc/self/fd or /dev/std*.
        """
        for _ in range(HOPS):
            if not follow or name == b".":
                return parent, name, real
            try:
                target = os.readlink(name, dir_fd=parent)
            except OSError:
                return parent, name, real
            own = own_fd(target)
            if own is not None:
                return own
            parent, name, real = self._split(call, parent, target)
        raise Refused(errno.ELOOP)

    def _check(self, real: bytes, name: bytes, *, entry: bool) -> bytes:
        path = real.rstrip(b"/") + b"/" + name if name != b"." else real
        why = self.protection.refuses(path, entry=entry)
        if why:
            raise Refused(errno.EACCES, path, why)
        return path

    def _note(self, path: bytes) -> None:
        if path not in self.protection.devices:
            self.paths.add(os.fsdecode(path))


def _shown(path: bytes, workspace: bytes) -> str:
    if beneath(path, workspace):
        return os.fsdecode(path[len(workspace.rstrip(b"/")) + 1:])
    return os.fsdecode(path)
