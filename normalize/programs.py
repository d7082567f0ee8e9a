"""The door for every program normalize starts outside the sandbox, and the rule that finds them.

Hooks, `git` for clones, commits and pushes, and any helper of normalize's
own start here (`run`, or `start` for one the caller polls), never through
`subprocess` elsewhere (`tests/spine/test_program_door.py` reads the AST of
the package and says so). Each program:

- is found by the trusted rule below (a bare name), never from the workspace;
- runs in a fresh, empty directory, or in the workspace when the caller asks,
  and then with `PYTHONSAFEPATH=1`, so a Python never imports a module from
  there;
- gets the sandbox's scrubbed environment (`scrub_env`) with `PATH` set to
  the trusted directories, so what it starts by name is found the same way,
  and the variables that load code from a path (`PYTHONPATH`, `LD_PRELOAD`,
  `BASH_ENV`, … `LOADERS`) keep only absolute entries outside the workspace;
- runs in its own session under a subreaper: when it ends, or at its time
  limit, every process it started dies with it, a `setsid` one included;
- has a time limit, always, and a timeout is one line (`ProgramError`).

git runs hardened (`GIT_HARDENED`, the one definition checkpoints use too),
and a clone may use only the transports of `CLONE_PROTOCOLS`.

The trusted rule, the only one normalize uses to find its own programs:

1. the system directories first, in this order: `/usr/bin`, `/bin`,
   `/usr/local/bin`, `/opt/homebrew/bin`;
2. then the entries of `PATH`, in order, keeping only an absolute path that
   lies outside every untrusted root: the workspace the call names, the data
   home and config dir (`NORMALIZE_HOME`, `NORMALIZE_CONFIG`) and the current
   directory, each compared by its real path (a link into the workspace counts
   as inside; `/` is never a root, or nothing would be left);
3. a candidate is an executable regular file whose real path is outside those
   roots as well (a system entry that links into the workspace is refused).

A lookup is made once per process for each (name, untrusted roots) pair.
`trusted_path` gives the same directories as a `PATH` value, for the
environment git itself runs in (the programs git starts through a shell, a
pager for instance, are then found by the same rule).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO

from normalize.errors import NormalizeError
from normalize.sandbox.env import scrub_env

__all__ = ["CLONE_PROTOCOLS", "GIT_HARDENED", "SYSTEM_DIRS", "Finished", "Program",
           "ProgramError", "git_flags", "resolve", "run", "start", "time_limit", "trusted_dirs",
           "trusted_path", "trusted_program"]

SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/local/bin", "/opt/homebrew/bin")
"""Searched first: directories only an administrator can write."""


def _roots(untrusted: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The real paths no helper may come from: the given ones, the data home, the cwd.

    The data home and config dir count when set by `NORMALIZE_HOME` /
    `NORMALIZE_CONFIG` (the platform's default lies in the person's HOME, which
    a program cannot write unless HOME is the workspace, a root already).
    """
    places: list[str | os.PathLike[str]] = [*untrusted]
    try:
        places.append(os.getcwd())
    except OSError:  # a deleted cwd: nothing to leave out
        pass
    places += [os.path.expanduser(os.environ[name]) for name in ("NORMALIZE_HOME",
               "NORMALIZE_CONFIG") if os.environ.get(name)]
    # "/" as a root (normalize started from `/` in a container) would leave out every program
    return tuple(sorted({os.path.realpath(p) for p in places} - {"/"}))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def trusted_dirs(untrusted: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
    """The directories a helper may come from, in search order (see the module's rule)."""
    return list(_dirs(_roots(untrusted), SYSTEM_DIRS, os.environ.get("PATH", "")))


@lru_cache(maxsize=64)
def _dirs(roots: tuple[str, ...], system: tuple[str, ...], path: str) -> tuple[str, ...]:
    out: list[str] = []
    for entry in [*system, *path.split(os.pathsep)]:
        if not entry or not os.path.isabs(entry):
            continue  # "" and relative entries mean the current directory
        real = os.path.realpath(entry)
        if real not in out and os.path.isdir(real) and not _inside(real, roots):
            out.append(real)
    return tuple(out)


def trusted_path(untrusted: Iterable[str | os.PathLike[str]] = ()) -> str:
    """`trusted_dirs` as a `PATH` value."""
    return os.pathsep.join(trusted_dirs(untrusted))


def trusted_program(name: str, untrusted: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """The absolute path of helper `name` found by the trusted rule, or None."""
    roots = _roots(untrusted)
    return _find(name, roots, SYSTEM_DIRS, os.environ.get("PATH", ""))


@lru_cache(maxsize=64)
def _find(name: str, roots: tuple[str, ...], system: tuple[str, ...], path: str) -> str | None:
    for directory in _dirs(roots, system, path):
        candidate = os.path.join(directory, name)
        real = os.path.realpath(candidate)
        if os.path.isfile(real) and os.access(real, os.X_OK) and not _inside(real, roots):
            return candidate
    return None


# -- hardened git ------------------------------------------------------------------------

GIT_HARDENED = {
    "core.hooksPath": os.devnull, "core.fsmonitor": "false", "core.untrackedCache": "false",
    "core.autocrlf": "false", "core.safecrlf": "false", "core.symlinks": "true",
    "core.filemode": "true", "core.ignorecase": "false", "core.quotePath": "false",
    "core.logAllRefUpdates": "false", "gc.auto": "0", "commit.gpgSign": "false",
    "diff.noprefix": "false", "diff.mnemonicPrefix": "false",
    # nothing git could start on its own: no pager, ssh, credential helper or transport
    "core.pager": "cat", "pager.log": "false", "pager.diff": "false",
    "core.sshCommand": "false", "credential.helper": "", "protocol.allow": "never",
    "diff.external": "false", "uploadpack.packObjectsHook": "false",
}
"""The `-c` settings that turn off everything git could start by itself (checkpoints use
them all; a clone all but `TRANSPORT`)."""
TRANSPORT = frozenset({"core.sshCommand", "credential.helper", "protocol.allow"})
"""What a git that must reach a remote keeps of the person's own set-up."""
CLONE_PROTOCOLS = "file:git:http:https:ssh"
"""`GIT_ALLOW_PROTOCOL` of a clone: never `ext::` (a command) or `fd::` (a descriptor)."""


def git_flags(*, transport: bool = False) -> list[str]:
    """`-c KEY=VALUE` for each of `GIT_HARDENED` (less `TRANSPORT` when git must reach one)."""
    flags = ["-c", "safe.directory=*"]
    for key, value in GIT_HARDENED.items():
        if not (transport and key in TRANSPORT):
            flags += ["-c", f"{key}={value}"]
    return flags


# -- the door ------------------------------------------------------------------------------

KILL_WAIT = 5.0  # seconds the reaper gets to end after its program was killed
KILL_POLL = 0.05


class ProgramError(NormalizeError):
    """A program normalize starts could not be found or started, or its time limit setting is
    not a number of seconds (running out of time is `Finished.timed_out`)."""


def time_limit(kind: str, default: float) -> float:
    """The time limit of one kind of program: `NORMALIZE_{KIND}_TIMEOUT` seconds, or `default`."""
    name = f"NORMALIZE_{kind.upper()}_TIMEOUT"
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ProgramError(f"{name}={raw!r}: seconds, more than 0")
    return value


def resolve(name: str, untrusted: Iterable[str | os.PathLike[str]] = ()) -> str:
    """The program a bare `name` means by the trusted rule; a path is the caller's own choice."""
    if os.sep in name:
        return name
    found = trusted_program(name, untrusted)
    if found is None:
        raise ProgramError(f"{name}: not found in a system directory or a PATH entry outside "
                           "the workspace")
    return found


@dataclass(frozen=True)
class Finished:
    """How a program ended: its exit code (None when killed at its time limit) and output."""

    argv: tuple[str, ...]
    code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    limit: float

    @property
    def ok(self) -> bool:
        return self.code == 0

    def why(self) -> str:
        """One line: the time limit it ran out of, or the last words it said, or its status."""
        if self.timed_out:
            return f"no answer in {self.limit:g} s (stopped, with all it started)"
        text = (self.stderr.strip() or self.stdout.strip()).decode(errors="replace")
        return text.splitlines()[-1].strip() if text else f"exit status {self.code}"


class Program:
    """One program started through the door: poll it, wait for it, or stop it."""

    def __init__(self, argv: Sequence[str], *, timeout: float,
                 untrusted: Iterable[str | os.PathLike[str]] = (), cwd: Path | None = None,
                 input: bytes | None = None, env: Mapping[str, str | None] | None = None,
                 allow: Iterable[str] = ()) -> None:
        from normalize.sandbox.reaper import Supervisor  # (ctypes: only once one starts)

        roots = [*untrusted]
        self.argv = (resolve(argv[0], roots), *argv[1:])
        self.limit = timeout
        self._scratch = None if cwd is not None else tempfile.mkdtemp(prefix="normalize-program-")
        where = str(cwd) if cwd is not None else str(self._scratch)
        environ = _outside(scrub_env(os.environ, allow), _roots(roots))
        environ.update(PATH=trusted_path(roots), PWD=where)
        if cwd is not None:  # the workspace, asked for: a Python imports nothing from it
            environ["PYTHONSAFEPATH"] = "1"
        for name, value in (env or {}).items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        stdin: IO[bytes] | int = subprocess.DEVNULL
        if input is not None:
            stdin = tempfile.TemporaryFile()
            stdin.write(input)
            stdin.seek(0)
        self._supervisor = Supervisor(pid_namespace=False)
        self.deadline = time.monotonic() + timeout
        try:
            self._proc = subprocess.Popen(
                self.argv, cwd=where, env=environ, stdin=stdin, stdout=self._out,
                stderr=self._err, start_new_session=True, preexec_fn=self._reaped)
        except (OSError, subprocess.SubprocessError) as exc:
            self._cleanup()
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ProgramError(f"cannot start {self.argv[0]}: {why}") from None
        finally:
            if not isinstance(stdin, int):
                stdin.close()
        self._finished: Finished | None = None

    def _reaped(self) -> None:
        """In the child: become a subreaper that outlives the program and kills what it left."""
        self._supervisor.orphan_guard()
        self._supervisor.start(_nothing)

    @property
    def pid(self) -> int:
        """The reaper's pid (the program runs below it)."""
        return self._proc.pid

    def poll(self) -> Finished | None:
        """How it ended, or None while it runs; past its time limit it is stopped."""
        if self._finished is None:
            if self._proc.poll() is not None:
                return self._done(timed_out=False)
            if time.monotonic() >= self.deadline:
                return self.stop(timed_out=True)
        return self._finished

    def wait(self) -> Finished:
        """Wait for it to end, at most until its time limit (then it is stopped)."""
        if self._finished is not None:
            return self._finished
        if not _ended_within(self._proc, self.deadline - time.monotonic()):
            return self.stop(timed_out=True)
        return self._done(timed_out=False)

    def stop(self, *, timed_out: bool = False) -> Finished:
        """Kill it and everything it started (its reaper kills what is left, then ends)."""
        if self._finished is not None:
            return self._finished
        from normalize.sandbox.reaper import children_of

        until = time.monotonic() + KILL_WAIT
        while self._proc.poll() is None and time.monotonic() < until:
            for child in children_of(self._proc.pid):  # (none yet: its fork is under way)
                for kill in (os.killpg, os.kill):
                    try:
                        kill(child, signal.SIGKILL)
                    except OSError:
                        pass
            try:
                self._proc.wait(timeout=KILL_POLL)
            except subprocess.TimeoutExpired:
                continue
        if self._proc.poll() is None:  # stuck: the program dies with it (parent death signal)
            self._proc.kill()
            self._proc.wait()
        return self._done(timed_out=timed_out)

    def _done(self, *, timed_out: bool) -> Finished:
        code = None if timed_out else self._proc.returncode
        if code is not None and code < 0:  # the program died by a signal: the shell's way
            code = 128 - code
        self._finished = Finished(self.argv, code, _read(self._out), _read(self._err),
                                  timed_out, self.limit)
        self._cleanup()
        return self._finished

    def _cleanup(self) -> None:
        self._out.close()
        self._err.close()
        self._supervisor.report.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def start(argv: Sequence[str], *, timeout: float,
          untrusted: Iterable[str | os.PathLike[str]] = (), cwd: Path | None = None,
          input: bytes | None = None, env: Mapping[str, str | None] | None = None,
          allow: Iterable[str] = ()) -> Program:
    """Start `argv` through the door (see the module doc); ProgramError when it cannot start.

    `untrusted`: the workspace (and other places a program may have written);
    `cwd`: the workspace, when the program must run there (otherwise a fresh
    empty directory); `env`: variables set over the scrubbed environment
    (None: removed); `allow`: names the scrub keeps.
    """
    return Program(argv, timeout=timeout, untrusted=untrusted, cwd=cwd, input=input, env=env,
                   allow=allow)


def run(argv: Sequence[str], *, timeout: float,
        untrusted: Iterable[str | os.PathLike[str]] = (), cwd: Path | None = None,
        input: bytes | None = None, env: Mapping[str, str | None] | None = None,
        allow: Iterable[str] = ()) -> Finished:
    """`start`, then wait for it to end (or be stopped at `timeout`)."""
    return start(argv, timeout=timeout, untrusted=untrusted, cwd=cwd, input=input, env=env,
                 allow=allow).wait()


LOADERS = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "LD_PRELOAD",
           "LD_LIBRARY_PATH", "LD_AUDIT", "NODE_PATH", "PERL5LIB", "PERLLIB", "RUBYLIB",
           "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "BASH_ENV", "ENV")
"""Variables naming places a program loads code from."""


def _outside(environ: dict[str, str], roots: tuple[str, ...]) -> dict[str, str]:
    """`environ` with each of `LOADERS` kept to its absolute entries outside `roots` (a
    relative entry means the directory the program runs in)."""
    for name in LOADERS:
        if name not in environ:
            continue
        entries = environ[name].replace(" ", os.pathsep).split(os.pathsep) \
            if name == "LD_PRELOAD" else environ[name].split(os.pathsep)
        kept = [e for e in entries if os.path.isabs(e) and
                not _inside(os.path.realpath(e), roots)]
        if kept:
            environ[name] = os.pathsep.join(kept)
        else:
            del environ[name]
    return environ


def _nothing() -> None:
    """The program's side of the reaper's fork: nothing more to do before the exec."""


def _ended_within(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait for `proc` at most `seconds`: on a pidfd (Popen's own wait polls, in steps up to
    50 ms), or by Popen where there is none."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=max(0.0, seconds))
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, seconds))
    finally:
        os.close(fd)
    if ready:
        proc.wait()
    return bool(ready)


def _read(handle: IO[bytes]) -> bytes:
    handle.seek(0)
    return handle.read()
