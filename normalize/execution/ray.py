"""The Ray executor: each child task runs as a `normalize` process on a worker of a Ray cluster.

Ray is imported when the first job is submitted (the `normalize[ray]` extra),
never at start-up. A job is a Ray task that starts `python -m normalize.cli.app
resume ID --quiet FLAGS` with the job's store as `NORMALIZE_HOME`; the process
is tied to its worker (`PR_SET_PDEATHSIG`), so a worker or node that dies
takes it along, and Ray then runs the job again elsewhere (`max_retries`): the
task's own resume continues it from its journal. The job's resources (CPUs,
memory) are Ray's scheduling requests; what the job returns is its exit
status and the node it ran on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from normalize.execution.executor import ChildJob, Handle, JobState

LOST = -1  # the exit status of a job Ray gave up on (its worker died more than it retries)
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Resources:
    """What one job asks the cluster for."""

    cpus: float = 1.0
    memory_mb: int | None = None


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the worker that started it dies."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the worker died already, between fork and prctl
        os._exit(1)


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Keep this process's SIGINT/SIGTERM handlers across `ray.init`.

    A Ray driver's connection installs its own (a SIGTERM that exits at once,
    and a native one that logs a stack), which would end a batch's parent
    without stopping its items or saving it: `ray job stop` sends SIGTERM.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def run_job(argv: list[str], env: dict[str, str], log: str) -> tuple[int, str]:
    """Run one job's process here (on a worker); its exit status and this node's id."""
    import subprocess

    node = ""
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # (run outside a worker: the tests of this function)
        node = ""
    if log and node:  # where it runs now, for `batch status` (beside the job's log)
        from pathlib import Path

        Path(log).with_name("node").write_text(node)
    out: Any = open(log, "ab") if log else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    finally:
        if log:
            out.close()
    return proc.wait(), node


class RayExecutor:
    """Runs child tasks as Ray tasks (see the module doc)."""

    def __init__(self, address: str | None = None, limit: int = 4, *,
                 resources: Resources | None = None, retries: int = 2,
                 python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.address = address
        self.limit = max(1, limit)
        self.resources = resources or Resources()
        self.retries = retries
        self.python = python or sys.executable
        self.env = dict(os.environ if env is None else env)
        self._places = threading.BoundedSemaphore(self.limit)
        self._refs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._remote: Any = None
        self.nodes: dict[str, str] = {}  # task id -> the node its last ended job ran on
        self.lost: dict[str, str] = {}  # task id -> why Ray gave its last job up

    def _ray(self) -> Any:
        import ray

        if not ray.is_initialized():
            with _signals_kept():
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        if self._remote is None:
            self._remote = ray.remote(run_job)
        return ray

    def argv(self, job: ChildJob) -> list[str]:
        return [self.python, "-m", "normalize.cli.app", "resume", job.task_id, "--quiet",
                *job.flags]

    def submit(self, job: ChildJob) -> Handle:
        ray = self._ray()
        self._places.acquire()
        try:
            options: dict[str, Any] = {"num_cpus": self.resources.cpus,
                                       "max_retries": self.retries}
            if self.resources.memory_mb:
                options["memory"] = self.resources.memory_mb * 1024 * 1024
            env = {**self.env, **job.env, "NORMALIZE_HOME": job.store}
            ref = self._remote.options(**options).remote(self.argv(job), env, job.log)
        except BaseException:
            self._places.release()
            raise
        handle = Handle(job.task_id, ref.hex())
        with self._lock:
            self._refs[handle.ref] = ref
        del ray
        return handle

    def _ref(self, handle: Handle) -> Any:
        with self._lock:
            ref = self._refs.get(handle.ref)
        if ref is None:
            raise KeyError(f"no job {handle.ref} for task {handle.task_id} in this executor")
        return ref

    def watch(self, handle: Handle) -> JobState:
        ready, _ = self._ray().wait([self._ref(handle)], timeout=0)
        return JobState.EXITED if ready else JobState.RUNNING

    def collect(self, handle: Handle, timeout: float | None = None) -> int | None:
        ray = self._ray()
        ref = self._ref(handle)
        ready, _ = ray.wait([ref], timeout=timeout)
        if not ready:
            return None
        try:
            status, node = ray.get(ref)
        except ray.exceptions.RayError as exc:  # its workers died more than it retries
            status, node = LOST, ""  # (the memory monitor's kills among them)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.lost[handle.task_id] = f"{type(exc).__name__}: {first}"[:200]
        self.nodes[handle.task_id] = str(node)
        self._forget(handle)
        return int(status)

    def cancel(self, handle: Handle) -> None:
        ray = self._ray()
        ref = self._ref(handle)
        ray.cancel(ref, force=True)  # the worker dies, and its process with it
        try:
            ray.wait([ref], timeout=30)
        finally:
            self._forget(handle)

    def _forget(self, handle: Handle) -> None:
        with self._lock:
            gone = self._refs.pop(handle.ref, None)
        if gone is not None:
            self._places.release()
