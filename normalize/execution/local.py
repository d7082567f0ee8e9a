"""The local executor: each child task runs as its own `normalize` process on this machine.

A job becomes `python -m normalize.cli.app resume ID --quiet FLAGS` with the
job's store as `NORMALIZE_HOME`, in a session of its own (so a Ctrl-C meant
for the parent's terminal reaches the parent, which stops its children
through `cancel`), its output in the job's log. At most `limit` run at once:
`submit` waits for a place. A stopped child gets SIGTERM (it ends as an
interrupted task, resumable), then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

from normalize.execution.executor import ChildJob, Handle, JobState

GRACE = 10.0  # seconds a cancelled child has to stop before it is killed


class LocalExecutor:
    """Runs child tasks as local `normalize` processes, at most `limit` at a time."""

    def __init__(self, limit: int = 4, *, python: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.limit = max(1, limit)
        self.python = python or sys.executable
        self.env = dict(os.environ if env is None else env)
        self._places = threading.BoundedSemaphore(self.limit)
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def argv(self, job: ChildJob) -> list[str]:
        return [self.python, "-m", "normalize.cli.app", "resume", job.task_id, "--quiet",
                *job.flags]

    def submit(self, job: ChildJob) -> Handle:
        self._places.acquire()
        try:
            env = {**self.env, **job.env, "NORMALIZE_HOME": job.store}
            out = open(job.log, "ab") if job.log else subprocess.DEVNULL
            try:
                proc = subprocess.Popen(self.argv(job), env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            finally:
                if job.log:
                    out.close()  # type: ignore[union-attr]
        except BaseException:
            self._places.release()
            raise
        handle = Handle(job.task_id, str(proc.pid))
        with self._lock:
            self._procs[handle.ref] = proc
        return handle

    def _proc(self, handle: Handle) -> subprocess.Popen[bytes]:
        with self._lock:
            proc = self._procs.get(handle.ref)
        if proc is None:
            raise KeyError(f"no job {handle.ref} for task {handle.task_id} in this executor")
        return proc

    def watch(self, handle: Handle) -> JobState:
        return JobState.RUNNING if self._proc(handle).poll() is None else JobState.EXITED

    def collect(self, handle: Handle, timeout: float | None = None) -> int | None:
        proc = self._proc(handle)
        try:
            status = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._forget(handle)
        return status

    def cancel(self, handle: Handle) -> None:
        proc = self._proc(handle)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._forget(handle)

    def _forget(self, handle: Handle) -> None:
        """Drop an ended job and free its place (once)."""
        with self._lock:
            gone = self._procs.pop(handle.ref, None)
        if gone is not None:
            self._places.release()
