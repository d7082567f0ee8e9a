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
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.execution.executor import ChildJob, Handle, JobState

LOST = -1  # the exit status of a job Ray gave up on (its worker died more than it retries)
PR_SET_PDEATHSIG = 1
REACH = 3.0  # seconds to wait for a cluster's address to answer at all
RUNS = "runs"  # beside a job's log: a line per run of the job that started on a worker


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


def _here(log: str) -> str:
    """This node's id, written beside the job's log with one more line in its runs (Ray runs
    a job again by itself when its worker dies)."""
    node = ""
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # (run outside a worker: the tests of this function)
        node = ""
    if log and node:  # where it runs now, for `batch status` (beside the job's log)
        Path(log).with_name("node").write_text(node)
    if log:
        with Path(log).with_name(RUNS).open("a") as runs:
            runs.write(node + "\n")
    return node


def run_job(argv: list[str], env: dict[str, str], log: str) -> tuple[int, str]:
    """Run one job's process here (on a worker); its exit status and this node's id."""
    import subprocess

    node = _here(log)
    out: Any = open(log, "ab") if log else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    finally:
        if log:
            out.close()
    return proc.wait(), node


class WarmSlot:
    """A Ray actor holding one warm worker (`normalize.cli.worker`) on its node: each job a
    fork of it, as in the local warm executor. The worker dies with the actor and the job's
    process with the worker (`PR_SET_PDEATHSIG`), so a lost node or a killed actor ends its
    job; Ray restarts the actor elsewhere and runs the job again (`max_task_retries`)."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.python = python
        self.env = env
        self.worker: Any = None

    def run(self, argv: list[str], env: dict[str, str], log: str) -> tuple[int, str]:
        import json

        from normalize.execution.warm import Worker

        node = _here(log)
        if self.worker is None or self.worker.proc.poll() is not None:
            self.worker = Worker.start(self.python, self.env, _die_with_parent)
        status = self.worker.run(json.dumps({"argv": argv, "env": env, "log": log}))
        return status, node


class RayExecutor:
    """Runs child tasks as Ray tasks (see the module doc)."""

    def __init__(self, address: str | None = None, limit: int = 4, *,
                 resources: Resources | None = None, retries: int = 2,
                 python: str | None = None, env: dict[str, str] | None = None,
                 warm: bool = False) -> None:
        self.address = address
        self.warm = warm  # each job a fork of a warm worker in an actor (`WarmSlot`)
        self._slot: Any = None  # the actor class
        self._idle: list[Any] = []  # actors free for a job
        self._slots: dict[str, Any] = {}  # a job's ref -> the actor running it
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
        self.retried: dict[str, int] = {}  # task id -> the runs of its last job Ray added
        self._logs: dict[str, str] = {}  # a job's ref -> its log

    def connect(self) -> None:
        """Join the cluster now, or say in one line why it refuses (see `cluster_refused`)."""
        if self.address and _host_port(self.address) is not None:
            _reach(self.address)
            _probe(self.address)
        try:
            self._ray()
        except ConfigError:
            raise
        except Exception as exc:  # (Ray's own: ConnectionError, RuntimeError, its RayError)
            raise cluster_refused(self.address or "", exc) from None

    def _ray(self) -> Any:
        import ray

        if not ray.is_initialized():
            with _signals_kept():
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        if self._remote is None:
            self._remote = ray.remote(run_job)
            self._slot = ray.remote(WarmSlot)
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
            if job.log:  # this job's runs, counted afresh
                Path(job.log).with_name(RUNS).unlink(missing_ok=True)
            slot = None
            if self.warm:
                slot = self._actor(options)
                ref = slot.run.remote(self.argv(job)[3:], env, job.log)
            else:
                ref = self._remote.options(**options).remote(self.argv(job), env, job.log)
        except BaseException:
            self._places.release()
            raise
        handle = Handle(job.task_id, ref.hex())
        with self._lock:
            self._refs[handle.ref] = ref
            self._logs[handle.ref] = job.log
            if slot is not None:
                self._slots[handle.ref] = slot
        del ray
        return handle

    def _actor(self, options: dict[str, Any]) -> Any:
        """An idle warm actor, or a new one (restarted by Ray, its job run again, as often
        as a job is retried)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        wanted = {k: v for k, v in options.items() if k != "max_retries"}
        return self._slot.options(**wanted, max_restarts=self.retries,
                                  max_task_retries=self.retries).remote(self.python, self.env)

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
            self._drop(handle)
        self.nodes[handle.task_id] = str(node)
        self.retried[handle.task_id] = max(0, self._runs(handle) - 1)
        self._forget(handle)
        return int(status)

    def _drop(self, handle: Handle) -> None:
        """The job's warm actor is not given another job (it died, or was killed)."""
        with self._lock:
            slot = self._slots.pop(handle.ref, None)
        if slot is not None:
            with contextlib.suppress(Exception):
                self._ray().kill(slot, no_restart=True)

    def _runs(self, handle: Handle) -> int:
        """How many times the job started on a worker (0: unknown, it kept no log)."""
        with self._lock:
            log = self._logs.get(handle.ref, "")
        try:
            return len(Path(log).with_name(RUNS).read_text().splitlines()) if log else 0
        except OSError:
            return 0

    def cancel(self, handle: Handle) -> None:
        ray = self._ray()
        ref = self._ref(handle)
        if self.warm:  # the actor dies, its worker and the job's process with it
            self._drop(handle)
        else:
            ray.cancel(ref, force=True)  # the worker dies, and its process with it
        try:
            ray.wait([ref], timeout=30)
        finally:
            self._forget(handle)

    def _forget(self, handle: Handle) -> None:
        with self._lock:
            gone = self._refs.pop(handle.ref, None)
            self._logs.pop(handle.ref, None)
            slot = self._slots.pop(handle.ref, None)
            if slot is not None:  # (its job ended: the actor takes the next)
                self._idle.append(slot)
        if gone is not None:
            self._places.release()


def _host_port(address: str) -> tuple[str, int] | None:
    """`HOST:PORT` of a cluster's address (None: `auto`, `ray://…` and the like)."""
    host, sep, port = address.rpartition(":")
    if not sep or "/" in address or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _reach(address: str) -> None:
    """Refuse at once an address where nothing answers (Ray would retry it for minutes)."""
    where = _host_port(address)
    assert where is not None
    try:
        socket.create_connection(where, timeout=REACH).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"--address {address}: no Ray cluster answers there ({why}); "
                          "check the head's address and port (RAY_ADDRESS)") from None


def _probe(address: str) -> None:
    """Ask the cluster's GCS once, so a refused token is said now, not after Ray's retries."""
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # (Ray's own client)
    except ImportError:
        return
    try:
        with _stderr_muted():  # (its C++ client logs each refusal there)
            GcsClient(address=address)
    except Exception as exc:
        if _auth(exc):
            raise cluster_refused(address, exc) from None


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """This process's file descriptor 2 to /dev/null for a moment."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _auth(exc: BaseException) -> bool:
    """Whether Ray's error is its token authentication's."""
    text = f"{type(exc).__name__}: {exc}"
    return "AuthenticationError" in text or "InvalidAuthToken" in text or \
        "authentication token" in text.lower()


def token_source() -> str:
    """Where this process's Ray token would come from ("" when it has none)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return path if Path(path).is_file() else ""
    token = Path.home() / ".ray" / "auth_token"
    return str(token) if token.is_file() else ""


def cluster_refused(address: str, exc: BaseException) -> ConfigError:
    """One line for a cluster that refused this process: its token, or what Ray said."""
    where = f"the Ray cluster at {address}" if address else "the Ray cluster"
    cause: BaseException | None = exc
    while cause is not None and not _auth(cause):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return ConfigError(f"{where} refused the connection ({type(exc).__name__}: {first}); "
                           "check --address (RAY_ADDRESS) and that the cluster is up")
    mode = os.environ.get("RAY_AUTH_MODE", "")
    token = token_source()
    if mode.lower() != "token" or not token:
        have = f"RAY_AUTH_MODE is {mode or 'unset'}" + (f", token in {token}" if token else
                                                         ", no token")
        return ConfigError(f"{where} requires token authentication ({have}; a cluster started "
                           "where ~/.ray/auth_token exists turns it on): set RAY_AUTH_MODE=token "
                           "and the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token, or "
                           "start the cluster with RAY_AUTH_MODE=disabled")
    return ConfigError(f"{where} refused this process's token ({token}, RAY_AUTH_MODE=token): "
                       "it is not the cluster's; use the token the cluster was started with")
