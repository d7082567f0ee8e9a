"""Landlock through ctypes: ABI probing, rulesets built in the parent, restriction in the child.

The ruleset is created and filled in the parent (opening paths, allocating,
raising readable errors); the child, between fork and exec, only makes two
plain syscalls: `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`.
The ruleset descriptor is close-on-exec, so the program never sees it.
Syscall numbers are the same on every architecture (asm-generic numbering).
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Callable, Iterable
from functools import cache

__all__ = [
    "ACCESS_FILE", "ACCESS_READ", "ACCESS_WRITE", "Ruleset", "abi_version", "fs_handled",
    "restrictor",
]

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2  # ABI 4
PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

ACCESS_FILE = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a non-directory may carry."""
ACCESS_READ = EXECUTE | READ_FILE | READ_DIR
ACCESS_WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG
                | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE | IOCTL_DEV)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


class _NetPortAttr(ctypes.Structure):
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@cache
def libc() -> ctypes.CDLL:
    """The C library, by its usual name first: `find_library` runs `ldconfig -p` (~20 ms)."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        from ctypes.util import find_library  # (it loads tempfile: only where libc is renamed)

        return ctypes.CDLL(find_library("c"), use_errno=True)


def _syscall(number: int, *args: object) -> int:
    call = libc().syscall
    call.restype = ctypes.c_long
    result = int(call(ctypes.c_long(number), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


@cache
def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError:
        return 0


def fs_handled(abi: int) -> int:
    """Every filesystem right this ABI knows, so none is left unrestricted."""
    mask = ACCESS_READ | (ACCESS_WRITE & ~(REFER | TRUNCATE | IOCTL_DEV))
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


class Ruleset:
    """A Landlock ruleset under construction; `fd` is what the child restricts itself with."""

    def __init__(self, abi: int, *, deny_tcp: bool) -> None:
        self.abi = abi
        self.handled = fs_handled(abi)
        net = NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
        attr = _RulesetAttr(self.handled, net, scoped)
        size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
        self.fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
        self.denies_tcp = bool(net)

    def allow(self, path: str | os.PathLike[str], access: int) -> bool:
        """Allow `access` beneath `path` (masked for the ABI and for files); False if gone."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            access &= self.handled
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= ACCESS_FILE
            if access:
                rule = _PathBeneathAttr(access, fd)
                _syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0))
        finally:
            os.close(fd)
        return True

    def allow_port(self, port: int, access: int = NET_CONNECT_TCP) -> None:
        """Allow `access` (connecting, by default) to TCP `port`; nothing when TCP is not denied."""
        if self.denies_tcp:
            rule = _NetPortAttr(access, port)
            _syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_NET_PORT),
                     ctypes.byref(rule), ctypes.c_uint32(0))

    def allow_all(self, paths: Iterable[str], access: int) -> None:
        for path in paths:
            self.allow(path, access)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def granter(access: int) -> Callable[[int, bytes], None]:
    """A function for the child: allow `access` beneath a path it mounted after the fork.

    A rule made in the parent names the directory the parent saw; a tmpfs the
    child mounts over it is a new hierarchy the rule does not cover. Prepared
    here for the same reason as `restrictor`.
    """
    syscall = libc().syscall
    syscall.restype = ctypes.c_long
    flags = os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY

    def grant(ruleset_fd: int, path: bytes) -> None:
        fd = os.open(path, flags)
        try:
            rule = _PathBeneathAttr(access, fd)
            if syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset_fd),
                       ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule),
                       ctypes.c_uint32(0)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        finally:
            os.close(fd)

    return grant


def restrictor() -> Callable[[int], None]:
    """A function for the child: no new privileges, then enter the Landlock domain.

    The libc symbols are looked up here, in the parent: a lookup (dlsym) in a
    child forked from a threaded process could wait forever on a lock.
    """
    c = libc()
    prctl, syscall = c.prctl, c.syscall
    syscall.restype = ctypes.c_long

    def restrict(ruleset_fd: int) -> None:
        if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        if syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd),
                   ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return restrict
