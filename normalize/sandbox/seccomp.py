"""seccomp-BPF filters assembled in Python: built in the parent, installed between fork and exec.

A filter is a short classic-BPF program over `struct seccomp_data` (syscall
number at offset 0, audit architecture at 4, arguments from 16, little-endian
on both supported machines). It checks the architecture first and kills a
process calling in through a foreign one (i386 on x86_64, where the numbers
differ), refuses x32 calls, then answers each listed syscall with an errno;
everything else is allowed. Jumps in classic BPF only go forward, so the
argument checks come after the number checks and every answer is a `ret`.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from normalize.sandbox.landlock import PR_SET_NO_NEW_PRIVS, libc

__all__ = [
    "ARCHES", "CLONE_NAMESPACES", "MOUNT_FAMILY", "Filter", "Sockets", "arch", "installer",
    "sandbox_filter", "syscall_number",
]

ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The AUDIT_ARCH value of each machine a filter can be built for."""
_X32 = 0x40000000
_NUMBERS = {
    "x86_64": {
        "socket": 41, "socketpair": 53, "sendto": 44, "sendmsg": 46, "ioctl": 16, "ptrace": 101,
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "mount": 165, "umount2": 166, "pivot_root": 155,
        "perf_event_open": 298, "process_vm_readv": 310, "process_vm_writev": 311,
        "open_by_handle_at": 304,
    },
    "aarch64": {
        "socket": 198, "socketpair": 199, "sendto": 206, "sendmsg": 211, "ioctl": 29,
        "ptrace": 117, "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "keyctl": 219,
        "add_key": 217, "request_key": 218, "bpf": 280, "mount": 40, "umount2": 39,
        "pivot_root": 41, "perf_event_open": 241, "process_vm_readv": 270,
        "process_vm_writev": 271, "open_by_handle_at": 265,
    },
}
_COMMON = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
           "fspick": 433, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
           "io_uring_register": 427}
for _table in _NUMBERS.values():
    _table.update(_COMMON)

MOUNT_FAMILY = ("mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
                "fsconfig", "fsmount", "fspick", "mount_setattr")
CLONE_NAMESPACES = 0x7E020000
"""CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (NEWTIME's bit is CSIGNAL in clone)."""
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, SOCK_TYPE_MASK = 1, 0xF
IPPROTO_TCP = 6
MSG_FASTOPEN = 0x20000000
EPERM, ENOSYS = 1, 38

_LD_ABS, _AND, _JEQ, _JSET, _RET = 0x20, 0x54, 0x15, 0x45, 0x06
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_NR, _ARCH = 0, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

Sockets = Literal["any", "none", "tcp", "inet"]
"""`"any"` (no check), `"none"`, `"tcp"` (AF_INET/AF_INET6 stream, protocol 0 or TCP: what
Landlock's TCP rules cover) or `"inet"` (AF_INET, AF_INET6 and AF_NETLINK of any kind)."""


def _arg(index: int) -> int:
    """Offset of the low 32 bits of argument `index` (the part int-sized arguments use)."""
    return 16 + 8 * index


def arch() -> str | None:
    """This machine's name in ARCHES, or None when no filter can be built for it."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return machine if machine in ARCHES else None


def syscall_number(name: str, machine: str | None = None) -> int:
    """The number of syscall `name` on `machine` (default: this one)."""
    return _NUMBERS[machine or arch() or "x86_64"][name]


class _Program:
    """Classic BPF with forward jumps to named labels."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        self.code.append((_LD_ABS, 0, 0, offset))

    def mask(self, k: int) -> None:
        self.code.append((_AND, 0, 0, k))

    def jeq(self, k: int, yes: int | str = 0, no: int | str = 0) -> None:
        self.code.append((_JEQ, yes, no, k))

    def jset(self, k: int, yes: int | str = 0, no: int | str = 0) -> None:
        self.code.append((_JSET, yes, no, k))

    def ret(self, k: int) -> None:
        self.code.append((_RET, 0, 0, k))

    def _offset(self, at: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - at - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"seccomp jump to {target} out of range ({offset})")
        return offset

    def assemble(self) -> bytes:
        return b"".join(struct.pack("<HBBI", code, self._offset(i, yes), self._offset(i, no), k)
                        for i, (code, yes, no, k) in enumerate(self.code))


@dataclass(frozen=True)
class Filter:
    """What a filter answers: EPERM, ENOSYS, conditional refusals; the rest is allowed."""

    refuse: tuple[str, ...] = ()
    enosys: tuple[str, ...] = ()
    clone_flags: int = 0
    """`clone` is refused (EPERM) when its flags hold any of these bits."""
    unshare_flags: int = 0
    """`unshare` is refused (EPERM) when its flags hold any of these bits."""
    sockets: Sockets = "any"
    ioctls: tuple[int, ...] = ()

    def build(self, machine: str | None = None) -> bytes:
        """The program, as the bytes of `struct sock_filter[]`, for `machine` (default: this)."""
        machine = machine or arch()
        if machine is None:
            raise OSError(f"no seccomp filter for this machine ({platform.machine()})")
        numbers = _NUMBERS[machine]
        prog = _Program()
        prog.load(_ARCH)
        prog.jeq(ARCHES[machine], 0, "kill")
        prog.load(_NR)
        if machine == "x86_64":
            prog.jset(_X32, "deny", 0)
        for name in self.refuse:
            prog.jeq(numbers[name], "deny", 0)
        for name in self.enosys:
            prog.jeq(numbers[name], "enosys", 0)
        blocks = self._blocks()
        for name in blocks:
            prog.jeq(numbers[name], name, 0)
        prog.ret(_RET_ALLOW)
        for name, emit in blocks.items():
            prog.label(name)
            emit(prog)
        self._returns(prog)
        return prog.assemble()

    def _blocks(self) -> dict[str, Callable[[_Program], None]]:
        """The syscalls whose arguments are looked at, each with the code that judges them."""
        blocks: dict[str, Callable[[_Program], None]] = {}
        if self.clone_flags:
            blocks["clone"] = lambda p: _flags(p, 0, self.clone_flags)
        if self.unshare_flags:
            blocks["unshare"] = lambda p: _flags(p, 0, self.unshare_flags)
        if self.sockets != "any":
            blocks["socket"] = _SOCKETS[self.sockets]
        if self.sockets == "tcp":  # TCP Fast Open connects from sendto/sendmsg
            blocks["sendto"] = lambda p: _flags(p, 3, MSG_FASTOPEN)
            blocks["sendmsg"] = lambda p: _flags(p, 2, MSG_FASTOPEN)
        if self.ioctls:
            blocks["ioctl"] = lambda p: _ioctl(p, self.ioctls)
        return blocks

    @staticmethod
    def _returns(prog: _Program) -> None:
        prog.label("allow")
        prog.ret(_RET_ALLOW)
        prog.label("deny")
        prog.ret(_RET_ERRNO | EPERM)
        prog.label("enosys")
        prog.ret(_RET_ERRNO | ENOSYS)
        prog.label("kill")
        prog.ret(_RET_KILL_PROCESS)


def _flags(prog: _Program, index: int, bits: int) -> None:
    prog.load(_arg(index))
    prog.jset(bits, "deny", "allow")


def _ioctl(prog: _Program, requests: tuple[int, ...]) -> None:
    prog.load(_arg(1))
    for request in requests:
        prog.jeq(request, "deny", 0)
    prog.ret(_RET_ALLOW)


def _no_sockets(prog: _Program) -> None:
    prog.ret(_RET_ERRNO | EPERM)


def _tcp_only(prog: _Program) -> None:
    prog.load(_arg(0))
    prog.jeq(AF_INET, "tcp_type", 0)
    prog.jeq(AF_INET6, "tcp_type", "deny")
    prog.label("tcp_type")
    prog.load(_arg(1))
    prog.mask(SOCK_TYPE_MASK)
    prog.jeq(SOCK_STREAM, 0, "deny")
    prog.load(_arg(2))
    prog.jeq(0, "allow", 0)
    prog.jeq(IPPROTO_TCP, "allow", "deny")


def _inet(prog: _Program) -> None:
    prog.load(_arg(0))
    prog.jeq(AF_INET, "allow", 0)
    prog.jeq(AF_INET6, "allow", 0)
    prog.jeq(AF_NETLINK, "allow", "deny")


_SOCKETS: dict[Sockets, Callable[[_Program], None]] = {
    "none": _no_sockets, "tcp": _tcp_only, "inet": _inet,
}

SANDBOX_REFUSED = ("unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev",
                   "keyctl", "add_key", "request_key", "bpf", *MOUNT_FAMILY, "io_uring_setup",
                   "io_uring_enter", "io_uring_register", "perf_event_open", "open_by_handle_at")


def sandbox_filter(*, network: bool, tcp_rules: bool) -> Filter:
    """The landlock tier's filter: what Landlock cannot refuse, refused by syscall.

    Sockets: with the network off, TCP stays (Landlock's TCP rules refuse its
    bind and connect) when `tcp_rules`, else no socket at all; with it on,
    internet and netlink sockets. Unix sockets are refused either way: a
    pathname socket outside the workspace cannot be told from one inside by a
    filter, and Landlock does not cover connect (socketpair stays).
    """
    sockets: Sockets = "inet" if network else "tcp" if tcp_rules else "none"
    return Filter(refuse=SANDBOX_REFUSED, enosys=("clone3",), clone_flags=CLONE_NAMESPACES,
                  sockets=sockets, ioctls=(TIOCSTI, TIOCLINUX))


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def installer(program: bytes) -> Callable[[], None]:
    """A function for the child: no new privileges, then install `program`.

    The buffer and libc's `prctl` are prepared here, in the parent; the child
    makes two syscalls. Once installed, a filter holds for every descendant.
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    prctl = libc().prctl

    def install() -> None:
        keep = (buffer, fprog)  # alive as long as this function is
        if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or prctl(
                PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(keep[1]), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return install
