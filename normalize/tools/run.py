"""The `run` tool: runs a program in the workspace, never through a shell.

`run_process` is the engine room shared with `test` and `analyze`: the child
runs under the sandbox (see `normalize.sandbox`: Landlock with namespaces, or
with a seccomp filter where namespaces are refused; a temporary directory as
TMPDIR) with its own process group, no stdin, and the parent's environment
minus credentials plus `PYTHONUNBUFFERED=1`; stdout and stderr are read
together without blocking, capped in memory, and the process group is stopped
on timeout or cancel. Under the sandbox, whatever the program started and left
running (daemons, `setsid`, `&`) is killed when it ends, and the outcome counts
it. Where the sandbox cannot be applied, a program starts only with `--sandbox
off` (fail closed). POSIX only.
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, TypedDict

from normalize.cancel import CancelToken
from normalize.errors import ToolError
from normalize.sandbox import (
    Confinement,
    SandboxMode,
    SandboxPolicy,
    SandboxTier,
    confine,
    probe,
)
from normalize.sandbox.reaper import KILL_ALL
from normalize.sandbox.writeguard import WriteGuard
from normalize.sandbox.writes import Tracer
from normalize.sandbox.writes import supported as writes_supported
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.approval import UNCONFINED_PARAM
from normalize.tools.base import ToolContext
from normalize.tools.shell import has_shell_syntax, text_after_verb, unquoted_operators
from normalize.tools.testout import progress_feed

__all__ = [
    "DEFAULT_MAX_BYTES", "ProcessOutcome", "RunTool", "refuse_shell_syntax",
    "run_process", "sandbox_of",
]

DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_GRACE = 3.0
_CHUNK = 65536
_POLL = 0.05
_DRAIN_AFTER_EXIT = 0.5  # a background grandchild may hold the pipe open
_REFUSED_SHOWN = 5
_REAPER_KILL_WAIT = 5.0  # for the reaper to kill what it holds before it is killed itself

SHELL_BUILTINS = frozenset({
    "cd", "export", "source", ".", "alias", "unalias", "set", "unset", "exit", "ulimit",
    "umask", "pushd", "popd", "dirs", "eval", "history", "declare", "local", "readonly",
    "shopt", "trap", "wait", "jobs", "fg", "bg", "builtin", "hash", "let",
})


@dataclass
class ProcessOutcome:
    """How a child process ended and what it printed (stdout and stderr merged)."""

    argv: list[str]
    output: str
    exit_code: int | None
    duration: float
    timed_out: bool = False
    cancelled: bool = False
    truncated_bytes: int = 0
    signal_name: str | None = None
    network: list[dict[str, object]] = field(default_factory=list)
    """The hosts asked of the proxy (`network = [hosts]`), each allowed or refused."""
    killed_leftovers: int = 0
    """Processes the program started and left running, killed when it ended."""
    refused_writes: list[str] = field(default_factory=list)
    """Protected paths the program tried to change, refused at the call (the landlock tier's
    write guard; the full tier's read-only mounts refuse without saying)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.cancelled)

    def failure(self, timeout: float) -> str | None:
        """Why the process failed, as one phrase, or None when it exited 0."""
        if self.timed_out:
            return f"timed out after {timeout:g} s"
        if self.cancelled:
            return "cancelled"
        if self.signal_name is not None:
            return f"killed by {self.signal_name}"
        if self.exit_code:
            return f"exit status {self.exit_code}"
        return None


class _Capture:
    """Keeps the first and the last `max_bytes / 2` bytes of a stream, counting the rest."""

    def __init__(self, max_bytes: int, on_output: Callable[[bytes], None] | None = None) -> None:
        self.on_output = on_output
        self.head_size = max_bytes // 2
        self.tail_size = max_bytes - self.head_size
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        if self.on_output is not None:
            self.on_output(chunk)
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_size:
                self._trim()

    def _trim(self) -> None:
        excess = len(self.tail) - self.tail_size
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        self._trim()
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        note = (
            f"\n… [output truncated: {self.dropped} bytes cut; kept the first "
            f"{len(self.head)} and the last {len(self.tail)} bytes] …\n"
        )
        return head + note + tail


@dataclass
class _Stopping:
    """When each signal went out; written by the cancelling thread and the reading loop."""

    interrupted_at: float = 0.0
    terminated_at: float = 0.0
    killed: bool = False
    killed_at: float = 0.0
    reaped: bool = False
    """The child is the sandbox's reaper: it takes `KILL_ALL` before SIGKILL."""
    forced: bool = False


def _kill(proc: subprocess.Popen[bytes], stopping: _Stopping) -> None:
    """SIGKILL the child's group; a reaper is told to kill all it holds instead (`KILL_ALL`),
    so a daemon the program left under it cannot outlive the action. The reading loop sends
    SIGKILL if the reaper has not ended `_REAPER_KILL_WAIT` seconds later (`_force`)."""
    stopping.killed, stopping.killed_at = True, time.monotonic()
    _signal_group(proc.pid, KILL_ALL if stopping.reaped else signal.SIGKILL)


def _force(proc: subprocess.Popen[bytes], stopping: _Stopping, now: float) -> None:
    if stopping.killed and not stopping.forced and now - stopping.killed_at >= _REAPER_KILL_WAIT:
        stopping.forced = True
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_BUILTIN_HINTS = {
    "cd": "each `run` starts in the workspace; pass paths instead (e.g. `run pytest sub/dir`)",
    "export": "set variables per command: `run env NAME=value PROGRAM ARGS...`",
    "source": "run the script with its interpreter instead (e.g. `run bash script.sh`)",
}
_BUILTIN_HINTS.update({
    "pushd": _BUILTIN_HINTS["cd"], "popd": _BUILTIN_HINTS["cd"],
    "set": _BUILTIN_HINTS["export"], "unset": _BUILTIN_HINTS["export"],
    "declare": _BUILTIN_HINTS["export"], "local": _BUILTIN_HINTS["export"],
    ".": _BUILTIN_HINTS["source"],
})


def _not_found(program: str) -> ToolError:
    if program in SHELL_BUILTINS:
        hint = f"`{program}` is a shell builtin, and normalize runs programs without a shell"
        if program in _BUILTIN_HINTS:
            hint += f"; {_BUILTIN_HINTS[program]}"
    elif "=" in program and not program.startswith("="):
        hint = f"to set a variable, use `run env {program} PROGRAM ARGS...`"
    elif " " in program:
        hint = "the program name holds spaces; pass the program and its arguments as separate words"
    else:
        hint = "install it, or check the name and PATH"
    return ToolError(f"program not found: {program} ({hint})", hint=hint)


def _pump(
    proc: subprocess.Popen[bytes],
    capture: _Capture,
    stopping: _Stopping,
    deadline: float,
    grace: float,
) -> bool:
    """Read the output until the process ends, escalating signals; True when it timed out."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    timed_out = False
    eof = False
    exited_at = 0.0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if eof:
                try:
                    proc.wait(_POLL)
                except subprocess.TimeoutExpired:
                    pass
            elif selector.select(_POLL):
                chunk = os.read(fd, _CHUNK)
                if chunk:
                    capture.add(chunk)  # (which hands it on to `on_output`)
                else:
                    eof = True
                    selector.unregister(fd)
            elif capture.on_output is not None:
                capture.on_output(b"")  # quiet: what came last is shown once its time comes
            now = time.monotonic()
            if proc.poll() is not None:
                exited_at = exited_at or now
                if eof or now - exited_at > _DRAIN_AFTER_EXIT:
                    return timed_out
                continue
            if not timed_out and now >= deadline:
                timed_out = True
                stopping.terminated_at = now
                _signal_group(proc.pid, signal.SIGTERM)
            since_interrupt = now - stopping.interrupted_at
            if stopping.interrupted_at and not stopping.terminated_at and since_interrupt >= grace:
                stopping.terminated_at = now
                _signal_group(proc.pid, signal.SIGTERM)
            since_term = now - stopping.terminated_at
            if stopping.terminated_at and not stopping.killed and since_term >= grace:
                _kill(proc, stopping)
            _force(proc, stopping, now)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    timeout: float,
    cancel: CancelToken | None = None,
    env: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    grace: float = DEFAULT_GRACE,
    on_spawn: Callable[[int], None] | None = None,
    on_writes: Callable[[set[str]], None] | None = None,
    sandbox: SandboxPolicy | None = None,
    workspace: Path | str | None = None,
    label: str = "",
    on_output: Callable[[bytes], None] | None = None,
    visible: Sequence[str] = (),
) -> ProcessOutcome:
    """Run `argv` to completion, timeout or cancel; raises `ToolError` if it cannot start.

    `on_output` is given each chunk of output as it arrives (a live view's tail, a
    harness's stream), and an empty one on quiet polls.

    `sandbox` (default: workspace mode) confines the child to `workspace`
    (default: `cwd`); when the sandbox cannot be applied it raises `ToolError`
    unless the mode is off.

    `on_writes`, where the platform can trace them (`normalize.sandbox.writes`),
    is told the absolute paths the program and its children wrote.

    `visible` names paths the program needs that the sandbox would empty (read-only).

    On cancel the process group gets SIGINT, then SIGTERM and SIGKILL `grace`
    seconds apart; a hard cancel sends SIGKILL at once. On timeout it gets
    SIGTERM, then SIGKILL after `grace`.
    """
    argv = list(argv)
    if not argv:
        raise ToolError("nothing to run")
    started = time.monotonic()
    if cancel is not None and cancel.cancelled:
        return ProcessOutcome(argv, "", None, 0.0, cancelled=True)
    if not Path(cwd).is_dir():
        raise ToolError(f"working directory does not exist: {cwd}")
    confinement = _confinement(sandbox or SandboxPolicy(), workspace or cwd, env, label, visible)
    tracer = _tracer(confinement) if on_writes is not None else None
    try:
        confinement.env["PYTHONUNBUFFERED"] = "1"
        proc = _spawn(argv, cwd, confinement)
        if tracer is not None:
            tracer.start()
        if on_spawn is not None:
            on_spawn(proc.pid)
        _serve_proxy(proc, confinement)
        outcome = _finish(proc, argv, started, timeout, cancel, max_bytes, grace, on_output,
                          reaped=confinement.preexec is not None)
        outcome.killed_leftovers = confinement.leftovers()
        if confinement.guard is not None:
            outcome.refused_writes = list(dict.fromkeys(confinement.guard.refused))
        confinement.close()  # the proxy's log is whole once it stopped
        outcome.network = confinement.network_log()
        return outcome
    finally:
        confinement.close()
        if tracer is not None and on_writes is not None:
            written = tracer.stop()
            if tracer.usable:
                on_writes(written)


def _tracer(confinement: Confinement) -> Tracer | WriteGuard | None:
    """A write tracer whose filter the child installs last before exec; None where unsupported.

    In the landlock tier the write guard is the tracer: a second filter's listener would be
    asked first and let every call through unchecked.
    """
    if confinement.guard is not None:
        return confinement.guard
    if not writes_supported() or confinement.preexec is None:
        return None  # unconfined (`--sandbox off`): no_new_privs would change what runs
    tracer = Tracer()
    confine_child = confinement.preexec

    def preexec() -> None:
        if confine_child is not None:
            confine_child()
        tracer.preexec()

    confinement.preexec = preexec
    return tracer


def _serve_proxy(proc: subprocess.Popen[bytes], confinement: Confinement) -> None:
    """Start the program's proxy (a host list); `ToolError` and no program when it cannot."""
    try:
        confinement.started()
    except OSError as exc:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        raise ToolError(f"refused: the network proxy could not start ({exc.strerror or exc})"
                        ) from None


def _confinement(policy: SandboxPolicy, workspace: Path | str, env: Mapping[str, str] | None,
                 label: str, visible: Sequence[str] = ()) -> Confinement:
    """The child's sandbox, or `ToolError` when it cannot be applied (fail closed)."""
    abi, tier = 0, SandboxTier.NONE
    if policy.mode is not SandboxMode.OFF:
        found = probe()
        if not found.available:
            raise ToolError(f"refused: the sandbox is unavailable ({found.reason}); rerun with "
                            f"--sandbox off to run programs unconfined")
        abi, tier = found.landlock_abi, found.tier
    try:
        return confine(policy, workspace, abi=abi, env=env, label=label, tier=tier,
                       visible=visible)
    except OSError as exc:
        raise ToolError(f"refused: the sandbox could not be prepared ({exc.strerror or exc}); "
                        f"rerun with --sandbox off to run programs unconfined") from None


def _spawn(argv: list[str], cwd: Path | str, confinement: Confinement) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=confinement.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=confinement.preexec,  # syscalls only: see normalize.sandbox
        )
    except FileNotFoundError:
        raise _not_found(argv[0]) from None
    except PermissionError:
        raise ToolError(f"not executable: {argv[0]}") from None
    except subprocess.SubprocessError:
        why = confinement.refusal()
        raise ToolError(f"refused: the sandbox could not be applied to {argv[0]}"
                        f"{f' ({why})' if why else ''}; rerun with --sandbox off to run "
                        f"programs unconfined") from None
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _finish(proc: subprocess.Popen[bytes], argv: list[str], started: float, timeout: float,
            cancel: CancelToken | None, max_bytes: int, grace: float,
            on_output: Callable[[bytes], None] | None = None, reaped: bool = False
            ) -> ProcessOutcome:
    """Read the running child to its end (timeout, cancel) and describe how it ended."""

    stopping = _Stopping(reaped=reaped)

    def on_cancel() -> None:
        if proc.poll() is not None:
            return
        if cancel is not None and cancel.hard:
            _kill(proc, stopping)
        elif not stopping.interrupted_at:
            stopping.interrupted_at = time.monotonic()
            _signal_group(proc.pid, signal.SIGINT)

    unregister = cancel.on_cancel(on_cancel) if cancel is not None else None
    if cancel is not None and cancel.cancelled:  # cancelled while starting
        on_cancel()
    capture = _Capture(max_bytes, on_output)
    assert proc.stdout is not None
    deadline = started + timeout
    timed_out = False
    try:
        timed_out = _pump(proc, capture, stopping, deadline, grace)
    finally:
        if unregister is not None:
            unregister()
        if proc.poll() is None:  # interrupted by an exception: leave nothing behind
            _kill(proc, stopping)
            try:
                proc.wait(_REAPER_KILL_WAIT)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
    code = proc.returncode
    signal_name = None
    if code < 0:
        try:
            signal_name = signal.Signals(-code).name
        except ValueError:
            signal_name = f"signal {-code}"
        code = 128 - code
    cancelled = bool(stopping.interrupted_at or stopping.killed) and not timed_out
    return ProcessOutcome(
        argv=argv,
        output=capture.text(),
        exit_code=code,
        duration=time.monotonic() - started,
        timed_out=timed_out,
        cancelled=cancelled,
        truncated_bytes=capture.dropped,
        signal_name=signal_name,
    )


class SandboxArgs(TypedDict):
    """The sandbox keywords of `run_process`."""

    sandbox: SandboxPolicy
    workspace: Path
    label: str


def sandbox_of(ctx: ToolContext, action: Action | None = None) -> SandboxArgs:
    """The sandbox arguments of `run_process` for an action in `ctx`."""
    policy = ctx.sandbox
    if action is not None and action.params.get(UNCONFINED_PARAM) is True:
        policy = replace(policy, mode=SandboxMode.OFF)
    return SandboxArgs(sandbox=policy, workspace=ctx.workspace, label=ctx.task_id)


def refuse_shell_syntax(action: Action, words: list[str]) -> None:
    """Raise `ToolError` when the command relies on a shell: operators, redirection, `$(…)`.

    With the command text at hand, only unquoted operators count, so
    `python -c "a; b"` and a file named `'a;b.txt'` pass. With words alone, a
    word holding whitespace was quoted and is taken literally; any other word
    with shell syntax is refused, and so is a program name holding any.
    """
    rest = text_after_verb(action)
    try:
        found = None if rest is None else unquoted_operators(rest)
    except ValueError:
        found = None
    if found is not None:
        first = words[0] if words else ""
        if not found and not (has_shell_syntax([first]) or " " in first.strip()):
            return
    else:
        first, *others = words or [""]
        literal = [w for w in others if not any(c.isspace() for c in w)]
        if not has_shell_syntax([first, *literal]):
            return
    raise ToolError(
        "refused: the command uses shell syntax (`;`, `&&`, `|`, `>`, `$(…)`), but normalize "
        "runs programs without a shell; split it into separate `run` actions (one program "
        "each) and write files with `write`"
    )


def _parse_leading(args: list[str], default_timeout: float) -> tuple[float, list[str]]:
    """`--timeout N` (or `--timeout=N`) before the program, and an optional `--`."""
    timeout = default_timeout
    while args and args[0].startswith("--timeout"):
        option = args.pop(0)
        if option == "--timeout":
            if not args:
                raise ToolError("--timeout needs a number of seconds")
            value = args.pop(0)
        elif option.startswith("--timeout="):
            value = option.split("=", 1)[1]
        else:
            args.insert(0, option)
            break
        try:
            timeout = float(value)
        except ValueError:
            raise ToolError(f"--timeout needs a number of seconds, not {value!r}") from None
        if timeout <= 0:
            raise ToolError(f"--timeout must be positive, not {value}")
    if args and args[0] == "--":
        args.pop(0)
    return timeout, args


def outcome_result(outcome: ProcessOutcome, timeout: float, **data: object) -> ActionResult:
    """The `ActionResult` of a finished process: success on exit 0, else error or cancelled."""
    extra: dict[str, object] = {"argv": outcome.argv, **data}
    if outcome.truncated_bytes:
        extra["truncated_bytes"] = outcome.truncated_bytes
    if outcome.network:
        extra["network"] = outcome.network
    output = outcome.output
    if outcome.killed_leftovers:
        extra["killed_leftovers"] = outcome.killed_leftovers
        output += (f"\n[normalize: the program left {outcome.killed_leftovers} process(es) "
                   f"running; they were killed when it ended — nothing outlives its action]\n")
    if outcome.refused_writes:
        extra["refused_writes"] = outcome.refused_writes
        shown = ", ".join(outcome.refused_writes[:_REFUSED_SHOWN])
        more = len(outcome.refused_writes) - _REFUSED_SHOWN
        output += (f"\n[normalize: the sandbox refused changing {shown}"
                   f"{f' and {more} more' if more > 0 else ''}: every .git and .normalize, "
                   f"and normalize's own places, stay as they were]\n")
    result = ActionResult(
        status=ResultStatus.SUCCESS,
        output=output,
        duration=outcome.duration,
        exit_code=outcome.exit_code,
        data=extra,
    )
    reason = outcome.failure(timeout)
    if outcome.cancelled:
        result.status = ResultStatus.CANCELLED
        result.error = reason
    elif reason is not None:
        result.status = ResultStatus.ERROR
        result.error = reason
    return result


def _shell_command(action: Action, words: list[str]) -> str:
    """The command line for `/bin/sh -c`, as written when the text is at hand."""
    rest = text_after_verb(action)
    if rest is not None and words == action.args:
        return rest
    if len(words) == 1:
        return words[0]
    return " ".join(shlex.quote(w) if any(c.isspace() for c in w) else w for w in words)


IDEMPOTENCY_VAR = "NORMALIZE_IDEMPOTENCY_KEY"


def idempotency_env(ctx: ToolContext, action: Action) -> dict[str, str] | None:
    """The environment with the action's idempotency key (`TASK:KEY`), for a program that
    makes a request elsewhere and can pass it on (a retried run sends the same key)."""
    key = action.idempotency or action.key
    if not key or not ctx.task_id:
        return None
    return {**os.environ, IDEMPOTENCY_VAR: f"{ctx.task_id}:{key}"}


PROJECT_VENVS = (".venv", "venv", "env")


def project_venv(root: Path | None) -> Path | None:
    """The project's own virtual environment (`.venv`, `venv` or `env` with a Python), if any."""
    if root is None:
        return None
    for name in PROJECT_VENVS:
        venv = root / name
        if (venv / "pyvenv.cfg").is_file() and (venv / "bin" / "python").is_file():
            return venv
    return None


def venv_env(root: Path, env: Mapping[str, str] | None) -> dict[str, str] | None:
    """`env` as an activated project venv has it (its `bin` first on PATH, `VIRTUAL_ENV`), so
    `run python`, `run pytest` and `run pip` are the project's, as `test` is; None: unchanged."""
    venv = project_venv(root)
    if venv is None:
        return None if env is None else dict(env)
    base = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONHOME"}
    path = base.get("PATH", os.defpath)
    return {**base, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{path}"}


class RunTool:
    """`run [--timeout N] PROGRAM ARGS...`: a program in the workspace, output and exit code."""

    name: ClassVar[str] = "run"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "runs a program in the workspace (no shell); output and exit code"

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES, grace: float = DEFAULT_GRACE) -> None:
        self.max_bytes = max_bytes
        self.grace = grace

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        default = float(action.params.get("timeout") or ctx.timeout)  # a workflow step's
        timeout, words = _parse_leading(action.args, default)  # `--timeout N` still wins
        if not words:
            raise ToolError("run needs a program: run PROGRAM ARGS...")
        if action.params.get("shell") is True:
            argv = ["/bin/sh", "-c", _shell_command(action, words)]
        else:
            refuse_shell_syntax(action, words)
            argv = words
        outcome = run_process(
            argv,
            cwd=ctx.workspace,
            timeout=timeout,
            cancel=ctx.cancel,
            env=venv_env(ctx.workspace, idempotency_env(ctx, action)),
            max_bytes=self.max_bytes,
            grace=self.grace,
            on_spawn=ctx.on_spawn,
            on_writes=ctx.on_writes,
            on_output=progress_feed(ctx.on_progress, tests=False),
            **sandbox_of(ctx, action),
        )
        return outcome_result(outcome, timeout)
