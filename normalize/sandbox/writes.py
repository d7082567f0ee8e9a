"""Which paths a program wrote: a seccomp user-notification tracer (Linux 5.5+).

The child installs, as the last step before `exec`, a seccomp filter that
hands every path-writing syscall (`openat` with a write flag, `creat`,
`mkdir*`, `unlink*`, `rename*`, `link*`, `symlink*`, `truncate`, `mknod*`,
`chmod*`) to a listener, and sends the listener's descriptor to normalize
over a socket pair. A thread in normalize reads each call's path from the
caller's memory, resolves it against the caller's `cwd` or directory
descriptor, records it, and lets the call go on unchanged
(`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the tracer attributes, it never
decides. What a program's children write is traced too (the filter is
inherited). Writes through `io_uring` are not seen.

So a checkpoint can tell the program's changes from those a person or
another task made while it ran. Where it cannot be installed, `Tracer.usable`
is False and the caller counts every change during the action.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import select
import socket
import struct
import threading

__all__ = ["Tracer", "supported"]

_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name -> (x86_64 nr, aarch64 nr); -1 where the syscall does not exist
_ALWAYS = {"creat": (85, -1), "truncate": (76, 45), "rename": (82, -1), "renameat": (264, 38),
           "renameat2": (316, 276), "unlink": (87, -1), "unlinkat": (263, 35),
           "rmdir": (84, -1), "mkdir": (83, -1), "mkdirat": (258, 34), "link": (86, -1),
           "linkat": (265, 37), "symlink": (88, -1), "symlinkat": (266, 36),
           "mknod": (133, -1), "mknodat": (259, 33), "chmod": (90, -1),
           "fchmodat": (268, 53), "openat2": (437, 437), "fchmodat2": (452, 452)}
_OPENS = {"open": ((2, -1), 1), "openat": ((257, 56), 2)}  # nr, the flags argument
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# which arguments are paths, and which descriptor each is relative to (None: cwd)
_PATHS: dict[str, list[tuple[int, int | None]]] = {
    "open": [(0, None)], "openat": [(1, 0)], "openat2": [(1, 0)], "creat": [(0, None)],
    "truncate": [(0, None)], "rename": [(0, None), (1, None)], "renameat": [(1, 0), (3, 2)],
    "renameat2": [(1, 0), (3, 2)], "unlink": [(0, None)], "unlinkat": [(1, 0)],
    "rmdir": [(0, None)], "mkdir": [(0, None)], "mkdirat": [(1, 0)],
    "link": [(1, None)], "linkat": [(3, 2)], "symlink": [(1, None)], "symlinkat": [(2, 1)],
    "mknod": [(0, None)], "mknodat": [(1, 0)], "chmod": [(0, None)], "fchmodat": [(1, 0)],
    "fchmodat2": [(1, 0)]}

_SECCOMP_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER = 1 << 3
_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_CONTINUE = 1
_RECV = 0xC0502100
_SEND = 0xC0182101
_ID_VALID = 0x40082102
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_PR_SET_NO_NEW_PRIVS = 38
_AT_FDCWD = 0xFFFFFF9C
_NOTIF = struct.Struct("=QII iIQ6Q")
_RESP = struct.Struct("=QqiI")


def _machine() -> str:
    return platform.machine()


def supported() -> bool:
    """Whether this platform has the syscall table the filter needs."""
    return os.name == "posix" and _machine() in _ARCH and hasattr(socket, "send_fds")


def _numbers() -> tuple[dict[int, str], dict[int, tuple[str, int]]]:
    column = 0 if _machine() == "x86_64" else 1
    always = {nrs[column]: name for name, nrs in _ALWAYS.items() if nrs[column] >= 0}
    opens = {nrs[column]: (name, arg) for name, (nrs, arg) in _OPENS.items() if nrs[column] >= 0}
    return always, opens


def _filter() -> bytes:
    """The BPF program: notify for path-writing syscalls, allow everything else."""
    always, opens = _numbers()

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)

    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    body: list[bytes] = []
    for nr, (_, arg) in opens.items():  # jeq nr -> load the flags, notify on a write flag
        body += [op(jeq, nr, 0, 4), op(ld, 16 + 8 * arg), op(jset, _WRITE_FLAGS, 0, 1),
                 op(ret, _RET_USER_NOTIF), op(ret, _RET_ALLOW)]
    for nr in always:
        body += [op(jeq, nr, 0, 1), op(ret, _RET_USER_NOTIF)]
    head = [op(ld, 4), op(jeq, _ARCH[_machine()], 1, 0), op(ret, _RET_ALLOW), op(ld, 0)]
    # an open's branch reloads the accumulator: put the syscall number back after it
    out: list[bytes] = list(head)
    index = 0
    for _ in opens:
        out += body[index:index + 5]
        out.append(op(ld, 0))
        index += 5
    out += body[index:]
    out.append(op(ret, _RET_ALLOW))
    return b"".join(out)


class Tracer:
    """One program's tracer: `preexec` in the child, `start` after spawn, `stop` at its end."""

    def __init__(self) -> None:
        self.usable = supported()
        self.paths: set[str] = set()
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._child.set_inheritable(False)
        self._listener = -1
        self._mems: dict[int, int] = {}  # pid -> its /proc/PID/mem, open
        self._thread: threading.Thread | None = None
        self._stop_r, self._stop_w = os.pipe()
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall, self._prctl = libc.syscall, libc.prctl
        self._ioctl = ctypes.CDLL(None, use_errno=True).ioctl
        self._ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        program = _filter()
        self._prog_buf = ctypes.create_string_buffer(program)
        self._fprog = struct.pack("=HxxxxxxQ", len(program) // 8,
                                  ctypes.addressof(self._prog_buf))
        self._fprog_buf = ctypes.create_string_buffer(self._fprog)
        self._sys_seccomp = _SYS_SECCOMP.get(_machine(), -1)

    def preexec(self) -> None:
        """In the child, last before exec: install the filter, hand its listener over."""
        if not self.usable:
            return
        try:
            self._prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            fd = self._syscall(self._sys_seccomp, _SECCOMP_SET_MODE_FILTER, _FLAG_NEW_LISTENER,
                               self._fprog_buf)
            if fd < 0:  # EBUSY under another tracer, ENOSYS on an old kernel: not traced
                self._child.send(b"-")
                return
            socket.send_fds(self._child, [b"+"], [fd])
            os.close(fd)
        except OSError:
            return

    def start(self) -> None:
        """In normalize, once the child runs: take the listener and answer it in a thread."""
        self._child.close()
        if not self.usable:
            return
        try:
            ready, _, _ = select.select([self._parent], [], [], 5.0)
            msg, fds, _, _ = socket.recv_fds(self._parent, 4, 1) if ready else (b"", [], 0, None)
        except OSError:
            msg, fds = b"", []
        if msg != b"+" or not fds:
            self.usable = False
            return
        self._listener = fds[0]
        self._thread = threading.Thread(target=self._serve, name="write-tracer", daemon=True)
        self._thread.start()

    def stop(self) -> set[str]:
        """End the tracing (the program is gone); the absolute paths it wrote."""
        os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(10)
        for fd in (self._listener, self._stop_r, self._stop_w, *self._mems.values()):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._parent.close()
        self._child.close()
        return self.paths

    def _serve(self) -> None:
        names, opens = _numbers()
        everything = {**names, **{nr: name for nr, (name, _) in opens.items()}}
        buf = ctypes.create_string_buffer(_NOTIF.size)
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            events = dict(poller.poll())
            if self._stop_r in events:
                return
            if not events.get(self._listener, 0) & select.POLLIN:
                return  # POLLHUP: every process the filter watched has exited
            ctypes.memset(buf, 0, _NOTIF.size)
            if self._ioctl(self._listener, _RECV, ctypes.addressof(buf)) != 0:
                if ctypes.get_errno() in (4, 2):  # EINTR, ENOENT (the caller went away)
                    continue
                return
            ident, pid, _, nr, _, _, *args = _NOTIF.unpack(buf.raw)
            try:
                name = everything.get(nr)
                if name is not None:
                    self._record(pid, name, list(args), ident)
            except Exception:  # the call must go on, whatever the recording did
                pass
            finally:
                self._answer(ident)

    def _answer(self, ident: int) -> None:
        resp = ctypes.create_string_buffer(_RESP.pack(ident, 0, 0, _CONTINUE))
        self._ioctl(self._listener, _SEND, ctypes.addressof(resp))

    def _record(self, pid: int, name: str, args: list[int], ident: int) -> None:
        for path_arg, dir_arg in _PATHS.get(name, []):
            path = _read_string(self._mems, pid, args[path_arg])
            if path is None:
                continue
            ident_buf = ctypes.c_uint64(ident)
            if self._ioctl(self._listener, _ID_VALID, ctypes.addressof(ident_buf)) != 0:
                return  # the caller is gone: what we read may be another process's memory
            where = _base(pid, None if dir_arg is None else args[dir_arg])
            if where is not None:  # as written, and with the links above it resolved
                full = os.path.normpath(os.path.join(where, path))
                self.paths.add(full)
                head, tail = os.path.split(full)
                self.paths.add(os.path.join(os.path.realpath(head), tail))


def _read_string(mems: dict[int, int], pid: int, address: int) -> str | None:
    """A NUL-terminated string in the caller's memory (its `/proc/PID/mem` kept open)."""
    for _ in range(2):
        fd = mems.get(pid)
        try:
            if fd is None:
                fd = mems[pid] = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            raw = os.pread(fd, 4096, address)
        except (OSError, ValueError, OverflowError):
            raw = b""
        if raw:
            return os.fsdecode(raw.split(b"\0", 1)[0])
        if fd is not None:  # a pid reused since, or an unmapped page: open it afresh once
            with contextlib.suppress(OSError):
                os.close(mems.pop(pid))
    return None


def _base(pid: int, dirfd: int | None) -> str | None:
    """The directory a relative path is resolved from: the caller's cwd or a descriptor."""
    try:
        if dirfd is None or dirfd & 0xFFFFFFFF == _AT_FDCWD:
            return os.readlink(f"/proc/{pid}/cwd")
        return os.readlink(f"/proc/{pid}/fd/{dirfd & 0xFFFFFFFF}")
    except OSError:
        return None
