"""The calls the write guard decides (`normalize.sandbox.writeguard`), one function each.

Each reads its paths once from the caller, resolves them beneath a directory
opened here (`Guard._split`, `_final`), checks them (`Protection`), and
makes the change itself, relative to that descriptor and never through a final
symlink; an open's descriptor is handed to the caller (`Guard._install`).
A refusal is `Refused(errno)`; `Gone` when the caller went away meanwhile.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["AT_FDCWD", "HANDLERS", "HOPS", "OWN_UMASK", "PROTECTED_SPELLINGS", "Call", "Gone",
           "Guard", "Protection", "Refused", "beneath", "own_fd", "umask_in"]

PROTECTED_SPELLINGS = frozenset({b".git", b".normalize"})
"""Entry names (compared case-insensitively) no program may create, change or delete."""
_WALK_LIMIT = 100_000

_O_TMPFILE = getattr(os, "O_TMPFILE", 0o20200000)
AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW, _AT_REMOVEDIR, _AT_SYMLINK_FOLLOW = 0x100, 0x200, 0x400
_AT_EMPTY_PATH = 0x1000
_RENAME_EXCHANGE = 2
HOPS = 40
"""How many symlinks one path may go through, as the kernel counts them."""
_OWN_FD = re.compile(rb"^/(?:proc/(?:self|thread-self)|dev)/fd/(\d+)$")
_STD = {b"/dev/stdin": 0, b"/dev/stdout": 1, b"/dev/stderr": 2}


class Refused(Exception):
    """A call the guard answers with an errno (EACCES for a protected or outside path)."""

    def __init__(self, code: int, path: bytes = b"", why: str = "") -> None:
        super().__init__(code)
        self.code, self.path, self.why = code, path, why


_UMASK = re.compile(rb"\nUmask:\s*([0-7]+)")


def umask_in(status: bytes) -> int:
    found = _UMASK.search(status)
    return int(found.group(1), 8) if found else 0o022


with open("/proc/self/status", "rb") as _fh:
    OWN_UMASK = umask_in(_fh.read())


@dataclass
class Call:
    """One notification: the caller, the call, and the descriptors opened for it."""

    ident: int
    pid: int
    name: str
    args: list[int]
    fds: list[int] = field(default_factory=list)

    def keep(self, fd: int) -> int:
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


@dataclass(frozen=True)
class Protection:
    """Where programs may change paths: `writable` directories and `devices`, minus `hidden`
    places and every protected name beneath `workspace`. Paths are real and absolute."""

    workspace: bytes
    writable: tuple[bytes, ...]
    devices: frozenset[bytes] = frozenset()
    hidden: frozenset[bytes] = frozenset()

    @classmethod
    def of(cls, workspace: str, writable: Iterable[str], devices: Iterable[str] = (),
           hidden: Iterable[str] = ()) -> Protection:
        real = [os.fsencode(os.path.realpath(p)) for p in writable]
        return cls(os.fsencode(os.path.realpath(workspace)), tuple(real),
                   frozenset(os.fsencode(os.path.realpath(d)) for d in devices),
                   frozenset(os.fsencode(os.path.realpath(h)) for h in hidden))

    def refuses(self, path: bytes, *, entry: bool) -> str:
        """Why `path` may not be changed ("" when it may): as a name in its directory
        (`entry`: create, remove, rename, link) or as an object (write, truncate, chmod,
        times). "protected" and "hidden" are what the guard adds; "outside" is Landlock's."""
        if not entry and path in self.devices:
            return ""
        if _under_any(path, self.hidden) and not any(
                beneath(path, w) or (not entry and path == w) for w in self._carved):
            return "hidden"
        if _within(path, self.workspace):
            rest = path[len(self.workspace):].split(b"/")
            if any(part.lower() in PROTECTED_SPELLINGS for part in rest):
                return "protected"
        if any(beneath(path, w) or (not entry and path == w) for w in self.writable):
            return ""
        return "outside"

    @property
    def _carved(self) -> tuple[bytes, ...]:
        """The writable directories inside a hidden place (a harness turn's own home in the
        hidden root of every task's homes): writable all the same."""
        return tuple(w for w in self.writable if _under_any(w, self.hidden))

    def holds_protected(self, directory: int) -> bool:
        """Whether a directory (a descriptor) has a protected name anywhere below it; also
        True past `_WALK_LIMIT` entries, since moving it could then move a repository."""
        seen = 0
        stack = [f"/proc/self/fd/{directory}"]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for item in entries:
                seen += 1
                if os.fsencode(item.name).lower() in PROTECTED_SPELLINGS or seen > _WALK_LIMIT:
                    return True
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
        return False


def beneath(path: bytes, root: bytes) -> bool:
    return path.startswith(root.rstrip(b"/") + b"/")


def _under_any(path: bytes, roots: frozenset[bytes]) -> bool:
    """Whether `path` is one of `roots` or below one (a lookup per ancestor, not per root)."""
    while True:
        if path in roots:
            return True
        head = path.rpartition(b"/")[0]
        if not head or head == path:
            return b"/" in roots
        path = head


def _within(path: bytes, root: bytes) -> bool:
    return path == root or beneath(path, root)


class Guard(Protocol):
    """What a call's handler asks of the write guard (`normalize.sandbox.writeguard`)."""

    protection: Protection
    _syscall: Any  # the C library's syscall(2)
    _renameat2: int
    _utimensat: int
    _fchownat: int

    def umask(self, pid: int) -> int: ...
    def _string(self, call: Call, address: int) -> bytes: ...
    def _bytes(self, call: Call, address: int, size: int) -> bytes: ...
    def _base(self, call: Call, dirfd: int | None) -> int: ...
    def _valid(self, call: Call) -> None: ...
    def _split(self, call: Call, base: int, path: bytes) -> tuple[int, bytes, bytes]: ...
    def _final(self, call: Call, parent: int, name: bytes, real: bytes,
               follow: bool) -> tuple[int, bytes, bytes] | int: ...
    def _check(self, real: bytes, name: bytes, *, entry: bool) -> bytes: ...
    def _note(self, path: bytes) -> None: ...
    def _install(self, call: Call, fd: int, cloexec: bool) -> None: ...
    def _later(self, call: Call, parent: int, name: bytes, flags: int, path: bytes) -> None: ...


class Gone(Exception):
    """The caller went away while its call was decided: nothing to answer."""


def own_fd(path: bytes) -> int | None:
    if path in _STD:
        return _STD[path]
    found = _OWN_FD.match(path)
    return int(found.group(1)) if found else None


def _signed(value: int) -> int:
    return ctypes.c_int(value & 0xFFFFFFFF).value


def _open(guard: Guard, call: Call, dirfd: int | None, path_at: int, flags: int,
          mode: int) -> None:
    path = guard._string(call, path_at)
    base = guard._base(call, dirfd)
    guard._valid(call)
    flags = _slash_flags(path, flags)
    cloexec = bool(flags & os.O_CLOEXEC)
    own = own_fd(path) if path.startswith(b"/") else None
    for _ in range(HOPS):
        if own is not None:
            fd = _reopen(guard, call, own, flags)
            guard._install(call, fd, cloexec)
            return
        parent, name, real = guard._split(call, base, path)
        follow = not flags & os.O_NOFOLLOW and not (flags & os.O_CREAT and flags & os.O_EXCL)
        final = guard._final(call, parent, name, real, follow)
        if isinstance(final, int):
            own = final
            continue
        parent, name, real = final
        if flags & os.O_CREAT and flags & os.O_EXCL and _exists(parent, name):
            raise Refused(errno.EEXIST)
        checked = guard._check(real, name, entry=False)
        if not flags & os.O_NONBLOCK and _is_fifo(parent, name):
            guard._later(call, parent, name, flags, checked)
            return
        try:
            fd = _open_beneath(guard, call, parent, name, flags, mode)
        except OSError as exc:
            if exc.errno == errno.ELOOP and follow:  # a symlink put there since: resolve it
                continue
            raise
        guard._note(checked)
        guard._install(call, fd, cloexec)
        return
    raise Refused(errno.ELOOP)


def _slash_flags(path: bytes, flags: int) -> int:
    """"name/" names a directory, which no write opens nor creates (the kernel's EISDIR)."""
    if not path.endswith(b"/"):
        return flags
    if flags & os.O_CREAT:
        raise Refused(errno.EISDIR)
    return flags | os.O_DIRECTORY


def _open_beneath(guard: Guard, call: Call, parent: int, name: bytes, flags: int,
                  mode: int) -> int:
    """Open `name` in `parent` as asked, never through a symlink; a file made gets the caller's
    mode and umask. A FIFO is opened without blocking this thread."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if flags & _O_TMPFILE == _O_TMPFILE:
        fd = call.keep(os.open(name, flags, mode, dir_fd=parent))
        _own_mode(fd, mode, guard.umask(call.pid))
        return fd
    if flags & os.O_CREAT and not flags & os.O_EXCL:
        for _ in range(8):
            try:
                fd = call.keep(os.open(name, flags | os.O_EXCL, mode, dir_fd=parent))
            except FileExistsError:
                pass
            else:
                _own_mode(fd, mode, guard.umask(call.pid))
                return fd
            try:
                return call.keep(os.open(name, flags & ~os.O_CREAT, dir_fd=parent))
            except FileNotFoundError:
                continue  # removed between the two: try creating again
        raise Refused(errno.EAGAIN)
    fd = call.keep(os.open(name, flags, mode, dir_fd=parent))
    if flags & os.O_CREAT:
        _own_mode(fd, mode, guard.umask(call.pid))
    return fd


def _exists(parent: int, name: bytes) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    return True


def _is_fifo(parent: int, name: bytes) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _own_mode(fd: int, mode: int, umask: int) -> None:
    if umask != OWN_UMASK:
        os.chmod(f"/proc/self/fd/{fd}", mode & ~umask & 0o7777)


def _reopen(guard: Guard, call: Call, number: int, flags: int) -> int:
    """The caller's own descriptor `number` opened again (`/dev/stdout`): allowed when it is
    not a file, or a file the caller may change."""
    flags &= ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
    fd = call.keep(os.open(f"/proc/{call.pid}/fd/{number}",
                           (flags & ~os.O_TRUNC) | os.O_CLOEXEC | os.O_NONBLOCK))
    if not flags & os.O_NONBLOCK:
        os.set_blocking(fd, True)
    if stat.S_ISREG(os.fstat(fd).st_mode) or stat.S_ISDIR(os.fstat(fd).st_mode):
        real = os.readlink(f"/proc/self/fd/{fd}".encode())
        _refuse_object(guard, real)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
        guard._note(real)
    return fd


def _refuse_object(guard: Guard, real: bytes) -> None:
    """Refuse changing what a descriptor names (a path; pipes and sockets have none)."""
    why = guard.protection.refuses(real, entry=False) if real.startswith(b"/") else ""
    if why:
        raise Refused(errno.EACCES, real, why)


def _object(guard: Guard, call: Call, dirfd: int | None, path: bytes, flags: int,
            follow: bool) -> int:
    """An O_PATH descriptor of the object a call changes (a path, or AT_EMPTY_PATH's fd),
    checked."""
    if not path and flags & _AT_EMPTY_PATH and dirfd is not None:
        fd = guard._base(call, dirfd)
        guard._valid(call)
        real = os.readlink(f"/proc/self/fd/{fd}".encode())
        _refuse_object(guard, real)
        return fd
    base = guard._base(call, dirfd)
    guard._valid(call)
    own = own_fd(path) if path.startswith(b"/") else None
    if own is None:
        parent, name, real = guard._split(call, base, path)
        final = guard._final(call, parent, name, real, follow)
        if isinstance(final, int):
            own = final
        else:
            parent, name, real = final
            guard._check(real, name, entry=False)
            return call.keep(os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     dir_fd=parent))
    fd = call.keep(os.open(f"/proc/{call.pid}/fd/{own}", os.O_PATH | os.O_CLOEXEC))
    _refuse_object(guard, os.readlink(f"/proc/self/fd/{fd}".encode()))
    return fd


def _entry(guard: Guard, call: Call, dirfd: int | None, path_at: int,
           slash_ok: bool = False, create: bool = False) -> tuple[int, bytes, bytes]:
    """The parent, the name and the checked path of a name a call makes, removes or moves;
    one that would make what exists already is told EEXIST first, as the kernel tells it
    (`os.makedirs(..., exist_ok=True)` on a directory outside the workspace goes on)."""
    path = guard._string(call, path_at)
    base = guard._base(call, dirfd)
    guard._valid(call)
    parent, name, real = guard._split(call, base, path)
    if create and _exists(parent, name):
        raise Refused(errno.EEXIST)
    checked = guard._check(real, name, entry=True)
    if path.endswith(b"/") and not slash_ok and name != b".":  # "name/": a directory only
        try:
            is_dir = stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            is_dir = True  # the call itself says ENOENT
        if not is_dir:
            raise Refused(errno.ENOTDIR)
    return parent, name, checked


def _made(guard: Guard, call: Call, parent: int, name: bytes, mode: int) -> None:
    """Give a directory or node just made the caller's umask instead of normalize's."""
    umask = guard.umask(call.pid)
    if umask == OWN_UMASK:
        return
    fd = call.keep(os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent))
    kept = os.fstat(fd).st_mode & stat.S_ISGID
    os.chmod(f"/proc/self/fd/{fd}", (mode & ~umask & 0o1777) | kept)


def _mkdir(guard: Guard, call: Call, dirfd: int | None, path_at: int, mode: int) -> int:
    parent, name, path = _entry(guard, call, dirfd, path_at, slash_ok=True, create=True)
    os.mkdir(name, mode & 0o7777, dir_fd=parent)
    _made(guard, call, parent, name, mode)
    guard._note(path)
    return 0


def _mknod(guard: Guard, call: Call, dirfd: int | None, path_at: int, mode: int,
           device: int) -> int:
    parent, name, path = _entry(guard, call, dirfd, path_at, create=True)
    os.mknod(name, mode, device, dir_fd=parent)
    _made(guard, call, parent, name, mode)
    guard._note(path)
    return 0


def _unlink(guard: Guard, call: Call, dirfd: int | None, path_at: int, flags: int) -> int:
    parent, name, path = _entry(guard, call, dirfd, path_at)
    if flags & _AT_REMOVEDIR:
        os.rmdir(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)
    guard._note(path)
    return 0


def _symlink(guard: Guard, call: Call, target_at: int, dirfd: int | None,
             path_at: int) -> int:
    target = guard._string(call, target_at)  # what a link says is never followed here
    parent, name, path = _entry(guard, call, dirfd, path_at, create=True)
    os.symlink(target, name, dir_fd=parent)
    guard._note(path)
    return 0


def _link(guard: Guard, call: Call, olddir: int | None, old_at: int, newdir: int | None,
          new_at: int, flags: int) -> int:
    old = guard._string(call, old_at)
    source = _object(guard, call, olddir, old, flags, bool(flags & _AT_SYMLINK_FOLLOW))
    parent, name, path = _entry(guard, call, newdir, new_at, create=True)
    os.link(f"/proc/self/fd/{source}", name, dst_dir_fd=parent, follow_symlinks=True)
    guard._note(path)
    return 0


def _rename(guard: Guard, call: Call, olddir: int | None, old_at: int,
            newdir: int | None, new_at: int, flags: int) -> int:
    parent_old, name_old, path_old = _entry(guard, call, olddir, old_at)
    parent_new, name_new, path_new = _entry(guard, call, newdir, new_at)
    moved = [(parent_old, name_old, path_old)]
    if flags & _RENAME_EXCHANGE:
        moved.append((parent_new, name_new, path_new))
    for parent, name, path in moved:  # a directory holding a repository stays where it is
        with contextlib.suppress(OSError):
            fd = call.keep(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                   | os.O_CLOEXEC, dir_fd=parent))
            if guard.protection.holds_protected(fd):
                raise Refused(errno.EACCES, path + b"/.git", "protected")
    result = guard._syscall(ctypes.c_long(guard._renameat2), ctypes.c_long(parent_old),
                            ctypes.c_char_p(name_old), ctypes.c_long(parent_new),
                            ctypes.c_char_p(name_new), ctypes.c_long(flags))
    if result != 0:
        raise Refused(ctypes.get_errno())
    guard._note(path_old)
    guard._note(path_new)
    return 0


def _chmod(guard: Guard, call: Call, dirfd: int | None, path_at: int | None, mode: int,
           flags: int) -> int:
    path = b"" if path_at is None else guard._string(call, path_at)
    fd = _object(guard, call, dirfd, path, flags | (_AT_EMPTY_PATH if path_at is None else 0),
                 not flags & _AT_SYMLINK_NOFOLLOW)
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        raise Refused(errno.EOPNOTSUPP)
    os.chmod(f"/proc/self/fd/{fd}", mode & 0o7777)
    guard._note(os.readlink(f"/proc/self/fd/{fd}".encode()))
    return 0


def _truncate(guard: Guard, call: Call, path_at: int, length: int) -> int:
    path = guard._string(call, path_at)
    fd = _object(guard, call, None, path, 0, True)
    writable = call.keep(os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK
                                 | os.O_CLOEXEC))
    os.ftruncate(writable, length)
    guard._note(os.readlink(f"/proc/self/fd/{fd}".encode()))
    return 0


def _utimens(guard: Guard, call: Call, dirfd: int, path_at: int, times_at: int,
             flags: int) -> int:
    path = b"" if path_at == 0 else guard._string(call, path_at)
    times = None if times_at == 0 else guard._bytes(call, times_at, 32)
    fd = _object(guard, call, dirfd, path, flags | (_AT_EMPTY_PATH if path_at == 0 else 0),
                 not flags & _AT_SYMLINK_NOFOLLOW)
    buffer = None if times is None else ctypes.create_string_buffer(times, 32)
    result = guard._syscall(ctypes.c_long(guard._utimensat), ctypes.c_long(AT_FDCWD),
                            ctypes.c_char_p(f"/proc/self/fd/{fd}".encode()), buffer,
                            ctypes.c_long(0))
    if result != 0:
        raise Refused(ctypes.get_errno())
    return 0


def _chown(guard: Guard, call: Call, dirfd: int | None, path_at: int | None, uid: int,
           gid: int, flags: int) -> int:
    """chown, lchown, fchown, fchownat: made here on the checked object (an O_PATH descriptor
    with AT_EMPTY_PATH, so a symlink's own owner when the caller asked for it)."""
    path = b"" if path_at is None else guard._string(call, path_at)
    fd = _object(guard, call, dirfd, path, flags | (_AT_EMPTY_PATH if path_at is None else 0),
                 not flags & _AT_SYMLINK_NOFOLLOW)
    result = guard._syscall(ctypes.c_long(guard._fchownat), ctypes.c_long(fd),
                            ctypes.c_char_p(b""), ctypes.c_long(_signed(uid)),
                            ctypes.c_long(_signed(gid)), ctypes.c_long(_AT_EMPTY_PATH))
    if result != 0:
        raise Refused(ctypes.get_errno())
    guard._note(os.readlink(f"/proc/self/fd/{fd}".encode()))
    return 0


_XATTR_SIZE_MAX = 65536
_USER_XATTR = b"user."


def _xattr(guard: Guard, call: Call, dirfd: int | None, path_at: int | None, follow: bool,
           name_at: int) -> tuple[int, bytes]:
    """The checked object of an extended-attribute change, and the attribute's name.

    Only `user.` attributes are set here: an ACL (`system.`), a file capability or a
    label (`security.`, `trusted.`) set by normalize would carry normalize's rights, not
    the program's (a capability outside its user namespace), so those are refused, EPERM.
    """
    path = b"" if path_at is None else guard._string(call, path_at)
    fd = _object(guard, call, dirfd, path, _AT_EMPTY_PATH if path_at is None else 0, follow)
    name = guard._string(call, name_at)
    if not name.startswith(_USER_XATTR):
        raise Refused(errno.EPERM)
    return fd, name


def _setxattr(guard: Guard, call: Call, by_fd: bool, follow: bool) -> int:
    """setxattr, lsetxattr, fsetxattr: (the path or descriptor, name, value, size, flags)."""
    dirfd, path_at = (_dir(call.args[0]), None) if by_fd else (None, call.args[0])
    fd, name = _xattr(guard, call, dirfd, path_at, follow, call.args[1])
    size = call.args[3]
    if size > _XATTR_SIZE_MAX:
        raise Refused(errno.E2BIG)
    value = guard._bytes(call, call.args[2], size) if size else b""
    os.setxattr(f"/proc/self/fd/{fd}", name, value, _signed(call.args[4]))
    guard._note(os.readlink(f"/proc/self/fd/{fd}".encode()))
    return 0


def _removexattr(guard: Guard, call: Call, by_fd: bool, follow: bool) -> int:
    """removexattr, lremovexattr, fremovexattr: (the path or descriptor, name)."""
    dirfd, path_at = (_dir(call.args[0]), None) if by_fd else (None, call.args[0])
    fd, name = _xattr(guard, call, dirfd, path_at, follow, call.args[1])
    os.removexattr(f"/proc/self/fd/{fd}", name)
    guard._note(os.readlink(f"/proc/self/fd/{fd}".encode()))
    return 0


def _dir(value: int) -> int:
    return _signed(value)


_Handler = Callable[[Guard, Call], "int | None"]
HANDLERS: dict[str, _Handler] = {
    "open": lambda g, c: _open(g, c, None, c.args[0], c.args[1], c.args[2]),
    "openat": lambda g, c: _open(g, c, _dir(c.args[0]), c.args[1], c.args[2], c.args[3]),
    "creat": lambda g, c: _open(g, c, None, c.args[0],
                                os.O_CREAT | os.O_WRONLY | os.O_TRUNC, c.args[1]),
    "truncate": lambda g, c: _truncate(g, c, c.args[0], c.args[1]),
    "mkdir": lambda g, c: _mkdir(g, c, None, c.args[0], c.args[1]),
    "mkdirat": lambda g, c: _mkdir(g, c, _dir(c.args[0]), c.args[1], c.args[2]),
    "mknod": lambda g, c: _mknod(g, c, None, c.args[0], c.args[1], c.args[2]),
    "mknodat": lambda g, c: _mknod(g, c, _dir(c.args[0]), c.args[1], c.args[2], c.args[3]),
    "unlink": lambda g, c: _unlink(g, c, None, c.args[0], 0),
    "rmdir": lambda g, c: _unlink(g, c, None, c.args[0], _AT_REMOVEDIR),
    "unlinkat": lambda g, c: _unlink(g, c, _dir(c.args[0]), c.args[1], c.args[2]),
    "symlink": lambda g, c: _symlink(g, c, c.args[0], None, c.args[1]),
    "symlinkat": lambda g, c: _symlink(g, c, c.args[0], _dir(c.args[1]), c.args[2]),
    "link": lambda g, c: _link(g, c, None, c.args[0], None, c.args[1], 0),
    "linkat": lambda g, c: _link(g, c, _dir(c.args[0]), c.args[1], _dir(c.args[2]),
                                 c.args[3], c.args[4]),
    "rename": lambda g, c: _rename(g, c, None, c.args[0], None, c.args[1], 0),
    "renameat": lambda g, c: _rename(g, c, _dir(c.args[0]), c.args[1], _dir(c.args[2]),
                                     c.args[3], 0),
    "renameat2": lambda g, c: _rename(g, c, _dir(c.args[0]), c.args[1], _dir(c.args[2]),
                                      c.args[3], c.args[4]),
    "chmod": lambda g, c: _chmod(g, c, None, c.args[0], c.args[1], 0),
    "fchmod": lambda g, c: _chmod(g, c, _dir(c.args[0]), None, c.args[1], 0),
    "fchmodat": lambda g, c: _chmod(g, c, _dir(c.args[0]), c.args[1], c.args[2], 0),
    "fchmodat2": lambda g, c: _chmod(g, c, _dir(c.args[0]), c.args[1], c.args[2], c.args[3]),
    "utimensat": lambda g, c: _utimens(g, c, _dir(c.args[0]), c.args[1], c.args[2],
                                       c.args[3]),
    "chown": lambda g, c: _chown(g, c, None, c.args[0], c.args[1], c.args[2], 0),
    "lchown": lambda g, c: _chown(g, c, None, c.args[0], c.args[1], c.args[2],
                                  _AT_SYMLINK_NOFOLLOW),
    "fchown": lambda g, c: _chown(g, c, _dir(c.args[0]), None, c.args[1], c.args[2], 0),
    "fchownat": lambda g, c: _chown(g, c, _dir(c.args[0]), c.args[1], c.args[2], c.args[3],
                                    c.args[4]),
    "setxattr": lambda g, c: _setxattr(g, c, by_fd=False, follow=True),
    "lsetxattr": lambda g, c: _setxattr(g, c, by_fd=False, follow=False),
    "fsetxattr": lambda g, c: _setxattr(g, c, by_fd=True, follow=True),
    "removexattr": lambda g, c: _removexattr(g, c, by_fd=False, follow=True),
    "lremovexattr": lambda g, c: _removexattr(g, c, by_fd=False, follow=False),
    "fremovexattr": lambda g, c: _removexattr(g, c, by_fd=True, follow=True),
}
"""Each call's handler: None when it answered itself (an open's descriptor), else 0."""
