"""Opening files under a root without following links: the file tools' race-free path.

Checking a path and then opening it by name lets another process swap a
directory for a symlink in between. Here every directory of a path is opened
relative to its parent's descriptor with `O_NOFOLLOW | O_DIRECTORY`, the final
file with `O_NOFOLLOW`, new directories are made with `mkdir(dir_fd=)`, and a
write goes to a temporary file in the final directory that is renamed over the
target inside that same directory. A link anywhere on the way is an `OSError`
(ELOOP or ENOTDIR), never a file outside the root.

Paths are relative, already checked by the guard (no `..`, no absolute path).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from normalize.faults import armed, crash_point

__all__ = ["SUPPORTED", "LinkRefusedError", "open_dir", "open_file", "place", "read_bytes",
           "remove", "write_bytes"]

SUPPORTED = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")
"""Whether this platform can walk by descriptor (POSIX); elsewhere plain paths are used."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkRefusedError(OSError):
    """A component of a path was a symlink (or no longer a directory): nothing was written."""


def _parts(rel: str | Path) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if any(p == ".." for p in parts) or Path(rel).is_absolute():
        raise OSError(errno.EPERM, "path leaves its root", str(rel))
    return parts


@contextlib.contextmanager
def open_dir(root: Path | str, parts: list[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of `root/parts...`, each step opened without following a link."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for index, name in enumerate(parts):
            try:
                child = _step(fd, name, create)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                where = "/".join(parts[:index + 1])
                raise LinkRefusedError(exc.errno, "a symlink or not a directory", where) \
                    from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _step(fd: int, name: str, create: bool) -> int:
    """The directory `name` beneath `fd`, opened without following a link (made if asked)."""
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    try:
        return os.open(name, flags, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=fd)
    return os.open(name, flags, dir_fd=fd)


def open_file(root: Path | str, rel: str | Path) -> BinaryIO:
    """The file `rel` under `root` opened for reading, no link followed on the way."""
    if not SUPPORTED:
        return (Path(root) / rel).open("rb")
    *dirs, name = _parts(rel) or ["."]
    with open_dir(root, dirs) as dfd:  # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    fh = os.fdopen(fd, "rb")
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        fh.close()
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(rel))
    if not stat.S_ISREG(mode):
        fh.close()
        raise OSError(errno.EINVAL, "not a regular file", str(rel))
    os.set_blocking(fd, True)
    return fh


def read_bytes(root: Path | str, rel: str | Path) -> bytes:
    """The bytes of the file `rel` under `root`, opened without following any link."""
    with open_file(root, rel) as fh:
        return fh.read()


def write_bytes(root: Path | str, rel: str | Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace `root/rel` with `data` atomically, creating missing directories.

    The temporary file and the rename both live in the directory the walk
    opened, so a directory swapped for a link meanwhile cannot redirect them.
    An existing file keeps its permission bits; a symlink as the final name is
    refused (the guard resolved in-workspace links to their target already).
    """
    if not SUPPORTED:
        from normalize.fsutil import atomic_write

        atomic_write(Path(root) / rel, data, fsync=fsync)
        return
    *dirs, name = _parts(rel)
    with open_dir(root, dirs, create=True) as dfd:
        keep: int | None = None
        try:
            info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(info.st_mode):
                raise OSError(errno.ELOOP, "refusing to write through a symlink", str(rel))
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", str(rel))
            keep = stat.S_IMODE(info.st_mode)
        tmp = _tmp_name(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        fd = os.open(tmp, flags, 0o666, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if keep is not None:
                    os.fchmod(fh.fileno(), keep)
                if fsync:
                    os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        if fsync:
            with contextlib.suppress(OSError):
                os.fsync(dfd)


def _tmp_name(name: str) -> str:
    # os.urandom is what `secrets.token_hex` reads, without loading `secrets` (and `random`)
    return f".{name[:200]}.{os.urandom(4).hex()}.tmp"


def _check_final(dfd: int, name: str, rel: str | Path, *, links: bool) -> None:
    """Refuse a directory at the final name, and a symlink unless `links` (it is replaced)."""
    try:
        info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(rel))
    if stat.S_ISLNK(info.st_mode) and not links:
        raise LinkRefusedError(errno.ELOOP, "a symlink", str(rel))


def place(root: Path | str, rel: str | Path, data: bytes, *, mode: int = 0o644,
          link: bool = False, replace_link: bool = True, tmp: str = "", crash: str = "") -> None:
    """Put `data` at `root/rel` as a file with `mode` (or, with `link`, a symlink to `data`).

    Missing directories are made; a symlink on the way is a `LinkRefusedError`
    naming it. The new file is created `O_EXCL` under a temporary name in the
    directory the walk opened, then renamed over the name there, so it never
    follows a link, and a reader sees the old file or the new one. A symlink at
    the final name is replaced itself (never written through), or refused
    without `replace_link`. A fixed `tmp` name (an undo's, so a re-run finds what
    an interrupted one left) is cleared first. `crash` names a crash point
    reached half-way through the bytes (the fault-injection tests).
    """
    *dirs, name = _parts(rel)
    with open_dir(root, dirs, create=True) as dfd:
        _check_final(dfd, name, rel, links=replace_link)
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
        tmp = tmp or _tmp_name(name)
        try:
            if link:
                os.symlink(os.fsdecode(data), tmp, dir_fd=dfd)
            else:
                _write_new(dfd, tmp, data, mode, crash)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(dfd)


def _write_new(dfd: int, tmp: str, data: bytes, mode: int, crash: str) -> None:
    """Create `tmp` beneath `dfd` (owner-only until it is complete) and fill it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
    with os.fdopen(fd, "wb") as fh:
        if crash and armed(crash):
            fh.write(data[:len(data) // 2])
            fh.flush()
            crash_point(crash)
        fh.write(data)
        fh.flush()
        os.fchmod(fh.fileno(), mode)
        os.fsync(fh.fileno())


def remove(root: Path | str, rel: str | Path, *, prune: bool = True) -> bool:
    """Unlink `root/rel` beneath its directory's descriptor; True when it was there.

    A symlink on the way is a `LinkRefusedError`; a directory at the name is
    refused. With `prune`, the directories it leaves empty go too (never `root`).
    """
    *dirs, name = _parts(rel)
    try:
        with open_dir(root, dirs) as dfd:
            _check_final(dfd, name, rel, links=True)
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                return False
    except FileNotFoundError:
        return False
    while prune and dirs:
        last = dirs.pop()
        with open_dir(root, dirs) as dfd:
            try:
                os.rmdir(last, dir_fd=dfd)
            except OSError:
                break
    return True
