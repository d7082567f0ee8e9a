"""A warm worker: one process that has imported the run path and forks each job's process.

`python -m normalize.cli.worker` reads jobs, one JSON line each on stdin
(`{"argv": [...], "env": {...}, "log": PATH}`), and for each forks a child
that is exactly the process a fresh `python -m normalize.cli.app ARGV` would
be: its own session, stdin from /dev/null, stdout and stderr to the job's log,
the job's environment, the same `main` — only the interpreter's start and the
imports are paid once, here, not per job. It answers on stdout with one line
when the child started (`{"pid": N}`) and one when it ended (`{"status": S}`,
the exit status as `subprocess` gives it: negative for a signal, and `main_s`,
the seconds the job's `main` took, for the benchmarks).

Forking is safe because the worker never starts a thread (it refuses to fork
when one runs: `threading.active_count()`), and each child starts from the
worker's state as it was after the imports, never from another job's. The
child dies with the worker (`PR_SET_PDEATHSIG`): a worker that is killed takes
its job along, and the job is an attempt cut short, run again by its parent.
The worker does not die with its executor: when its input ends (the batch's
parent exited or was killed) it waits for the job it runs, then exits, so a
killed parent's items run on, to be re-attached to by `resume BATCH`.
After each job the worker imports what that job had to import itself, so the
next job finds it loaded (an agent's provider SDK, a tool's module).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import typer

from normalize import faults
from normalize.cli.app import app
from normalize.cli.app import main as app_main
from normalize.cli.complete import lighten_typer
from normalize.redact import Redactor
from normalize.sandbox import probe

PR_SET_PDEATHSIG = 1
_COMMAND: list[Callable[..., object]] = []  # the app's click command, built once (`_ready`)
WARM = ("normalize.cli.app", "normalize.cli.commands", "normalize.cli.launch",
        "normalize.runner", "normalize.engine", "normalize.drivers.workflow",
        "normalize.batch.items_make", "normalize.sandbox", "normalize.checkpoints.shadow",
        "normalize.store")


def warm(names: tuple[str, ...] | list[str] = WARM) -> None:
    """Import the modules a job's run needs (each one that fails is left to the job)."""
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def serve(jobs: BinaryIO, answers: int) -> None:
    """Run each job read from `jobs` in a forked child, answering on fd `answers`, until
    `jobs` ends."""
    for line in jobs:
        if not line.strip():
            continue
        job = json.loads(line)
        reader, writer = os.pipe()
        worker = os.getpid()
        pid = os.fork()
        if pid == 0:
            for fd in (reader, answers, jobs.fileno()):  # (the worker's own, not the job's)
                os.close(fd)
            try:
                _child(job, writer, worker)
            finally:
                os._exit(70)
        os.close(writer)
        _answer(answers, {"pid": pid})
        said = _read_all(reader).decode(errors="replace").split()
        _, raw = os.waitpid(pid, 0)
        ran = float(said[0]) if said and said[0].replace(".", "", 1).isdigit() else None
        _answer(answers, {"status": os.waitstatus_to_exitcode(raw), "main_s": ran})
        warm([n for n in said[1:] if n.partition(".")[0] == "normalize"])
        gc.freeze()
        if threading.active_count() != 1:  # (an import started one): end before the next
            return


def _answer(fd: int, message: dict[str, Any]) -> None:
    """Say `message` to the executor; one that is gone hears nothing (the worker still waits
    for its job: a batch's parent killed leaves its items running, to be re-attached to)."""
    data = json.dumps(message).encode() + b"\n"
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data):]


def _read_all(fd: int) -> bytes:
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _child(job: dict[str, Any], writer: int, worker: int) -> None:
    """In the forked child: become the job's process, run it, exit with its status."""
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != worker:  # the worker died between the fork and prctl
        os._exit(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(job["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) \
        if job.get("log") else os.open(os.devnull, os.O_WRONLY)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for fd in (null, out):
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(job["env"])
    faults.rearm()  # (read at import: this job's environment may arm another point)
    before = set(sys.modules)
    sys.argv = ["normalize", *job["argv"]]
    status = 1
    started = time.perf_counter()
    try:
        status = app_main(job["argv"], command=_COMMAND[0] if _COMMAND else app)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    finally:
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            _answer_raw(writer, " ".join([f"{time.perf_counter() - started:.6f}",
                                          *sorted(set(sys.modules) - before)]).encode())
        os._exit(status & 0xFF)


def _answer_raw(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)


def main() -> int:
    """The worker's own start: the job lines on stdin, answers on stdout, nothing else on
    either (fd 1 then points to stderr, so a stray print cannot break the answers)."""
    answers = os.dup(1)
    jobs = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    warm()
    _ready()
    if threading.active_count() == 1:  # (else no fork is safe: the executor starts another)
        gc.freeze()  # what the imports made is never collected: a fork's pages stay shared
        serve(jobs, answers)
    return 0


def _ready() -> None:
    """What every job would otherwise do first, done once here and inherited by each fork:
    the command line's click command built, the sandbox's tier found, the redactor's regex of
    this environment's secrets compiled. Each is a pure function of what the job's process
    has too (the same machine, the same environment but NORMALIZE_HOME and TRACEPARENT)."""
    with contextlib.suppress(Exception):
        lighten_typer()
        _COMMAND.append(typer.main.get_command(app))
    with contextlib.suppress(Exception):
        probe()
    with contextlib.suppress(Exception):
        with tempfile.TemporaryDirectory() as empty:
            Redactor.for_workspace(empty).redact("x" * 1024)


if __name__ == "__main__":
    sys.exit(main())
