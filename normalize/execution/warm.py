"""The warm executor: each item slot is a worker that stays up and forks each job's process.

A worker is `python -m normalize.cli.worker` (see there): it imports the run
path once and then, per job, forks a child that runs `resume ID --quiet FLAGS`
exactly as the local executor's fresh process would (its own session, the
job's environment and log, its own sandbox, journal and lease). Only the
interpreter's start and the imports are saved. At most `limit` jobs run at
once, one per worker; a worker is started when a job finds none idle.

A job's end is the worker's `{"status": S}` line. A worker that dies (killed,
out of memory) ends its job too (the child dies with it) and the job's status
is the worker's own (`-9` for a SIGKILL): to the batch's parent that is an
attempt cut short, submitted again. A cancelled job's session gets SIGTERM,
then SIGKILL after a grace period, as a local process's does.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from normalize.execution.executor import ChildJob, Handle, JobState

GRACE = 10.0  # seconds a cancelled job has to stop before it is killed
START = 120.0  # seconds a worker has to answer that it forked a job


@dataclass
class Worker:
    """One warm worker process and what it said so far (its executor's, or a Ray actor's)."""

    proc: subprocess.Popen[bytes]
    buffer: bytes = b""
    child: int = 0  # the pid of the job it runs (0: idle)
    status: int | None = None  # the job's exit status, once said
    main_s: float | None = None  # the seconds its `main` took, once said
    lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def read(self, timeout: float | None) -> bool:
        """Read what the worker said within `timeout` (None: until a line); False at its end."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.lines:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return True
            chunk = os.read(fd, 65536)
            if not chunk:
                return False
            self.buffer += chunk
            *whole, self.buffer = self.buffer.split(b"\n")
            self.lines += [json.loads(line) for line in whole if line.strip()]
        return True

    @classmethod
    def start(cls, python: str, env: dict[str, str],
              preexec: Callable[[], None] | None = None) -> Worker:
        """A new worker (`preexec`: run in it before its start, as `subprocess` does)."""
        return cls(subprocess.Popen([python, "-m", "normalize.cli.worker"], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=preexec))

    def run(self, line: str) -> int:
        """Run one job to its end here (a Ray actor's way); its exit status (the worker's own
        when it died: its job died with it)."""
        try:
            self.stdin.write(line.encode() + b"\n")
            self.stdin.flush()
        except OSError:
            return self.proc.wait()
        while True:
            said = self.next(None)
            if said is not None and "status" in said:
                return int(said["status"])

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The worker's next line; None within `timeout`; `{"status": its exit}` at its end."""
        if not self.read(timeout):
            return {"status": self.proc.wait(), "ended": True}
        return self.lines.pop(0) if self.lines else None


class WarmExecutor:
    """Runs child tasks in forks of warm local workers, at most `limit` at a time."""

    def __init__(self, limit: int = 4, *, python: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.limit = max(1, limit)
        self.python = python or sys.executable
        self.env = dict(os.environ if env is None else env)
        self._places = threading.BoundedSemaphore(self.limit)
        self._idle: list[Worker] = []
        self._busy: dict[str, Worker] = {}
        self._lock = threading.Lock()
        self._jobs = itertools.count(1)  # each job's number (its handle's)
        self.main_s: float | None = None  # the seconds the last ended job's main took

    def argv(self, job: ChildJob) -> list[str]:
        return ["resume", job.task_id, "--quiet", *job.flags]

    def _spawn(self) -> Worker:
        return Worker.start(self.python, self.env)

    def _worker(self) -> Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
        return self._spawn()

    def submit(self, job: ChildJob) -> Handle:
        """Give the job to an idle worker (a new one while none is): it is not waited for,
        so the first `limit` workers warm up side by side."""
        self._places.acquire()
        try:
            line = json.dumps({"argv": self.argv(job), "log": job.log,
                               "env": {**self.env, **job.env, "NORMALIZE_HOME": job.store}})
            worker = self._worker()
            if not self._send(worker, line):  # an idle worker gone: one new one, once
                self._stop(worker)
                worker = self._spawn()
                if not self._send(worker, line):  # (its job never started: a lost attempt)
                    worker.status = worker.proc.wait()
        except BaseException:
            self._places.release()
            raise
        handle = Handle(job.task_id, f"{worker.proc.pid}:{next(self._jobs)}")
        with self._lock:
            self._busy[handle.ref] = worker
        return handle

    def _send(self, worker: Worker, line: str) -> bool:
        """Give the worker the job; False when it is gone."""
        worker.child, worker.status, worker.main_s = 0, None, None
        try:
            worker.stdin.write(line.encode() + b"\n")
            worker.stdin.flush()
        except OSError:
            return False
        return True

    def _get(self, handle: Handle) -> Worker:
        with self._lock:
            worker = self._busy.get(handle.ref)
        if worker is None:
            raise KeyError(f"no job {handle.ref} for task {handle.task_id} in this executor")
        return worker

    def _settled(self, worker: Worker, timeout: float | None) -> int | None:
        """The job's exit status once the worker said it (or died), else None; the job's
        pid is learnt on the way (the worker's first answer)."""
        while worker.status is None:
            said = worker.next(timeout)
            if said is None:
                return None
            self._take(worker, said)
        return worker.status

    def _take(self, worker: Worker, said: dict[str, Any]) -> None:
        """Note what the worker said: its job forked (`pid`), or ended (`status`)."""
        if "pid" in said:
            worker.child = int(said["pid"])
            return
        worker.status = int(said.get("status", -signal.SIGKILL))
        worker.main_s = said.get("main_s")
        self.main_s = worker.main_s
        if said.get("ended"):  # the worker died: its job's session goes too
            self._kill_job(worker, signal.SIGKILL)

    def _until_forked(self, worker: Worker) -> None:
        """Wait (up to START) for the worker to fork the job, or end it; a worker that does
        neither is killed, and its job never started."""
        deadline = time.monotonic() + START
        while not worker.child and worker.status is None:
            said = worker.next(max(0.0, deadline - time.monotonic()))
            if said is None:
                self._stop(worker)
                worker.status = -signal.SIGKILL
                return
            self._take(worker, said)

    def watch(self, handle: Handle) -> JobState:
        return JobState.RUNNING if self._settled(self._get(handle), 0) is None \
            else JobState.EXITED

    def collect(self, handle: Handle, timeout: float | None = None) -> int | None:
        worker = self._get(handle)
        status = self._settled(worker, timeout)
        if status is not None:
            self._forget(handle, worker)
        return status

    def cancel(self, handle: Handle) -> None:
        worker = self._get(handle)
        if self._settled(worker, 0) is None and not worker.child:  # (not forked yet)
            self._until_forked(worker)
        if self._settled(worker, 0) is None:
            self._kill_job(worker, signal.SIGTERM)
            if self._settled(worker, GRACE) is None:
                self._kill_job(worker, signal.SIGKILL)
                self._settled(worker, None)
        self._forget(handle, worker)

    def _kill_job(self, worker: Worker, sig: int) -> None:
        if worker.child:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.child, sig)

    def _forget(self, handle: Handle, worker: Worker) -> None:
        """Drop an ended job and free its place (once); a live worker goes back to idle."""
        with self._lock:
            gone = self._busy.pop(handle.ref, None)
            if gone is not None and worker.proc.poll() is None and not worker.lines:
                self._idle.append(worker)
        if gone is not None:
            self._places.release()

    def _stop(self, worker: Worker) -> None:
        with contextlib.suppress(OSError):
            worker.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            worker.proc.kill()
        worker.proc.wait()

    def close(self) -> None:
        """End the idle workers (each finishes at the end of its input)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            with contextlib.suppress(OSError):
                worker.stdin.close()
            try:
                worker.proc.wait(5)
            except subprocess.TimeoutExpired:
                self._stop(worker)
