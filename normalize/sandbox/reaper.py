"""The processes between normalize and a program, so that nothing the program starts outlives it.

The child `subprocess.Popen` sees (the *intermediate*) never execs. With a PID
namespace it forks PID 1 of the namespace: a small init that mounts a fresh
`/proc`, forks the program, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to it,
reaps, and when the program ends kills whatever is left (the kernel would too,
once PID 1 exits). Without one, the intermediate is a child subreaper: orphans
reparent to it, and it kills every descendant still alive when the program
ends. Either way the intermediate ends as the program ended (the same exit
status, or death by the same signal), and the program's wait status and the
count of leftovers killed travel back through a few shared bytes (`Report`).
Parent death signals chain the whole tree to normalize: if normalize dies, so
does everything below it.

Only the program's process returns from `Supervisor.start`; the others end
with `os._exit`. The functions used after the fork are looked up before it.

normalize ends a program that outlived its timeout or a cancel with `KILL_ALL`,
never SIGKILL, first: the reaper then kills the program's group and, as subreaper,
every descendant left (a `setsid` daemon included), and ends as the program did.
Known limit of the subreaper: when the intermediate itself is SIGKILLed (normalize
killed), the program dies with it (parent death signal) but what the program
started outside its process group is left; PID 1's namespace has no such gap.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from normalize.sandbox.landlock import libc

__all__ = ["KILL_ALL", "Report", "Supervisor"]

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
RELAYED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
KILL_ALL = signal.SIGUSR2
"""Sent by normalize in place of SIGKILL: the reaper kills the program and everything it left
(killing the reaper itself would free a `setsid` daemon from the subreaper)."""
WATCHED = RELAYED | {signal.SIGCHLD, KILL_ALL}
_FORMAT = "iii"  # written, wait status, leftovers killed
_WHY = 240  # bytes after it: why the sandbox could not be set up, when it could not
_WHY_AT = struct.calcsize(_FORMAT)


class Report:
    """Bytes shared by normalize and the processes it forks: how the program ended, or why
    its sandbox could not be set up."""

    def __init__(self) -> None:
        self._buf: mmap.mmap | None = mmap.mmap(-1, _WHY_AT + _WHY)

    def write(self, status: int, killed: int) -> None:
        if self._buf is not None:
            struct.pack_into(_FORMAT, self._buf, 0, 1, status, killed)

    def refuse(self, why: str) -> None:
        """Said by the child before its set-up fails: which step, and the error."""
        if self._buf is not None:
            text = why.encode(errors="replace")[:_WHY - 1]
            self._buf[_WHY_AT:_WHY_AT + len(text) + 1] = text + b"\0"

    def refusal(self) -> str:
        """Why the child's set-up failed, or "" when it said nothing."""
        if self._buf is None:
            return ""
        return bytes(self._buf[_WHY_AT:_WHY_AT + _WHY]).split(b"\0", 1)[0].decode(
            errors="replace")

    def read(self) -> tuple[int, int] | None:
        """(wait status, leftovers killed), or None when nothing was written."""
        if self._buf is None:
            return None
        written, status, killed = struct.unpack_from(_FORMAT, self._buf, 0)
        return (status, killed) if written else None

    def close(self) -> None:
        if self._buf is not None:
            self._buf.close()
            self._buf = None


@dataclass
class Supervisor:
    """Runs in the child after the sandbox is set up: starts the program under a reaper."""

    pid_namespace: bool
    report: Report = field(default_factory=Report)
    parent: int = field(default_factory=os.getpid)
    proc_mounted: Callable[[], None] | None = None
    """Called in PID 1 once it mounted the namespace's /proc (so Landlock lets it be read)."""

    def __post_init__(self) -> None:
        c = libc()
        self._prctl, self._fork, self._mount = c.prctl, c.fork, c.mount  # not after the fork

    def orphan_guard(self) -> None:
        """Die with the parent; refuse to go on if it is already gone."""
        self._prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != self.parent:
            os._exit(1)

    def start(self, program: Callable[[], None]) -> None:
        """Fork the reaper (and PID 1); returns only in the process that becomes the program."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        if not self.pid_namespace:
            self._prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            pid = self._spawn(old, program)
            if pid == 0:
                return
            _never_return(self._reap_as_subreaper, pid)
        life_r, life_w = os.pipe()
        init = int(self._fork())
        if init < 0:
            raise OSError(ctypes.get_errno(), "fork failed")
        if init == 0:
            os.close(life_w)
            if self._init(life_r, old, program):
                return
        _never_return(self._relay_init, init, life_w)

    def _spawn(self, old: set[int | signal.Signals], program: Callable[[], None]) -> int:
        pid = int(self._fork())
        if pid < 0:
            raise OSError(ctypes.get_errno(), "fork failed")
        if pid == 0:
            os.setpgid(0, 0)  # its own group: the reaper forwards signals to the whole group
            self._prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            program()
            return 0
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        return pid

    def _init(self, life_r: int, old: set[int | signal.Signals],
              program: Callable[[], None]) -> bool:
        """PID 1: True in the program's process; otherwise never returns."""
        self._prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        os.set_blocking(life_r, False)
        try:
            if os.read(life_r, 1) == b"":  # the intermediate is gone already
                os._exit(1)
        except BlockingIOError:
            pass
        os.close(life_r)
        self._prctl(PR_SET_NAME, b"normalize-init", 0, 0, 0)  # what `ps` shows
        os.setsid()  # out of the intermediate's group: a signal reaches the program once
        if self._mount(b"proc", b"/proc", b"proc",  # a /proc showing this namespace only,
                       ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None) == 0:  # or the old
            if self.proc_mounted is not None:
                self.proc_mounted()
        pid = self._spawn(old, program)
        if pid == 0:
            return True
        _never_return(self._reap_as_init, pid)
        return False  # pragma: no cover - _never_return does not return

    def _reap_as_init(self, program: int) -> int:
        _quiet()
        status = _supervise(program)
        killed = 0
        try:
            os.kill(-1, signal.SIGKILL)  # everyone in the namespace but PID 1
        except ProcessLookupError:
            pass
        else:
            killed = _reap_all()
        self.report.write(status, killed)
        return 0

    def _reap_as_subreaper(self, program: int) -> int:
        _quiet()
        status = _supervise(program)
        self.report.write(status, _kill_descendants())
        return _exit_like(status, self._prctl)

    def _relay_init(self, init: int, life_w: int) -> int:
        _quiet(keep=life_w)
        status = _supervise(init)
        found = self.report.read()
        return _exit_like(found[0] if found else status, self._prctl)


def _never_return(body: Callable[..., int], *args: int) -> None:
    code = 1
    try:
        code = body(*args)
    finally:
        os._exit(code)


def _quiet(keep: int = -1) -> None:
    """Let go of every inherited descriptor (Popen's error pipe, …) but 0-2 and `keep`.

    The output pipe stays open until this process exits, so normalize sees the
    end of output and of the process together.
    """
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]  # few, however high the limit
    except OSError:
        fds = list(range(3, 4096))
    for fd in fds:
        if fd >= 3 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _supervise(pid: int) -> int:
    """Forward the relayed signals to `pid`'s group and reap children until it ends."""
    while True:
        info = signal.sigwaitinfo(WATCHED)
        if info.si_signo == KILL_ALL:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            continue
        if info.si_signo != signal.SIGCHLD:
            try:
                os.killpg(pid, info.si_signo)
            except OSError:
                try:
                    os.kill(pid, info.si_signo)
                except OSError:
                    pass
            continue
        while True:
            try:
                child, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if child == 0:
                break
            if child == pid:
                return status


def _killed(status: int) -> int:
    return int(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)


def _reap_all() -> int:
    """Wait for every child (PID 1 after killing the namespace); how many were killed."""
    killed = 0
    while True:
        try:
            _, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return killed
        except InterruptedError:
            continue
        killed += _killed(status)


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid` (the kernel's list, else a scan of /proc: the children
    file is optional)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
                found.append(int(name))
    return found


def _kill_descendants() -> int:
    """Kill every child until none is left (orphans keep reparenting here); how many."""
    killed = 0
    while True:
        children = children_of(os.getpid())
        if not children:
            break
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return killed
            if pid == 0:
                break
            killed += _killed(status)
    return killed


def _exit_like(status: int, prctl: Callable[..., int]) -> int:
    """End this process as the program ended: by the same signal, or with the same code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no core file from the relay
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
