"""Identifying a child process across a crash, and stopping one that outlived normalize.

A program `run` starts gets its own session, so a SIGKILL of normalize leaves
it running. The engine journals each child's pid and start time; on resume, a
child of an action whose outcome is unknown that is still alive (the same
process, not a reused pid) is stopped before anything else happens.
"""

from __future__ import annotations

import os
import signal
import time


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` in clock ticks (Linux), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
    try:
        return int(fields[19])  # field 22 overall: starttime
    except (IndexError, ValueError):
        return None


def same_process_alive(pid: int, started: int | None) -> bool:
    """Whether `pid` is still the process that was started at `started`."""
    if started is None:
        return False  # cannot tell a reused pid apart: leave it alone
    return start_time(pid) == started


def stop_group(pid: int, grace: float = 2.0) -> None:
    """SIGTERM the process group led by `pid`, then SIGKILL after `grace` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
