"""The terminal around a run: which renderer, whether a person is there, signals, errors."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TextIO, runtime_checkable

from normalize.cancel import CancelToken
from normalize.errors import NormalizeError

if TYPE_CHECKING:
    from normalize.events import Event, Subscriber


class Renderer(Protocol):
    """What shows a run (JSON lines, plain lines, the live view): each event, then `close`."""

    def __call__(self, event: Event) -> None:
        """Show one event of the run."""
        ...

    def close(self) -> None:
        """The run ended: leave the terminal as a shell expects it."""
        ...


class Pauses(Protocol):
    """A reader of the terminal that can give it up for a while (cli/typeahead.py's)."""

    def paused(self) -> contextlib.AbstractContextManager[None]: ...


@runtime_checkable
class Prompting(Protocol):
    """A renderer that can give the terminal to a prompt and take it back (not JSON lines)."""

    def attach_input(self, reader: Pauses | None) -> None:
        """The type-ahead reader to pause while a prompt has the terminal (or None)."""
        ...

    def hold(self) -> contextlib.AbstractContextManager[None]:
        """Give a prompt the terminal while the block runs."""
        ...


@runtime_checkable
class ShowsTyping(Prompting, Protocol):
    """A renderer that draws the line a person types for the model as it is typed (live view)."""

    def typing(self, line: str, waiting: int) -> None:
        """The line being typed, and how many lines wait for the model's next turn."""
        ...


Current = Callable[[], "Subscriber | None"]
"""The renderer showing the run at this moment (a follow-up run has its own), if any."""


@dataclass
class Environment:
    """Streams and terminal facts, replaced in tests."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    task_id: str | None = None
    """The task the command ran, once it ended (for what follows it: `--commit`)."""

    @property
    def stdout_tty(self) -> bool:
        return _isatty(self.stdout)

    @property
    def stderr_tty(self) -> bool:
        return _isatty(self.stderr)

    @property
    def stdin_tty(self) -> bool:
        return _isatty(self.stdin)

    @property
    def plain(self) -> bool:
        """No live view: not a terminal, or TERM=dumb (NO_COLOR drops colour only: no-color.org)."""
        return not self.stdout_tty or self.env.get("TERM", "") == "dumb"


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def error_line(env: Environment, message: str, hint: str | None = None) -> None:
    """One red line (plain when not a terminal), plus an optional hint line."""
    prefix = "\033[31merror:\033[0m" if _isatty(env.stderr) and "NO_COLOR" not in env.env \
        else "error:"
    env.stderr.write(f"normalize: {prefix} {message}\n")
    if hint:
        env.stderr.write(f"  hint: {hint}\n")
    env.stderr.flush()


def fail(env: Environment, exc: NormalizeError) -> int:
    error_line(env, str(exc), exc.hint)
    return int(exc.exit_status)


class PromptInterrupted(Exception):
    """A signal arrived while a prompt was reading: the prompt answers None at once."""


@contextlib.contextmanager
def at_prompt() -> Iterator[None]:
    """While inside, SIGINT/SIGTERM end the read as well as cancelling the run."""
    SignalCancel.prompting += 1
    try:
        yield
    finally:
        SignalCancel.prompting -= 1


class SignalCancel:
    """SIGINT/SIGTERM → cancel the run gracefully; a second one → stop at once.

    The first signal sets the cancel token: the running subprocess gets SIGINT
    (then SIGTERM after a grace period, see `tools.run`), the engine finishes
    the current decision and saves the task `interrupted`. The second sets the
    token again (`hard`: subprocesses are killed at once) and raises
    KeyboardInterrupt in the main thread; the engine still leaves through
    `finalize`, and every file write is atomic, so nothing is left half written.

    While it is entered, `output_closed` (the reader of stdout went away)
    cancels the run too, once and gracefully, with the reason "stdout closed".
    """

    running: ClassVar[list[SignalCancel]] = []
    prompting: ClassVar[int] = 0
    """Prompts reading now: a signal then also ends the read (`PromptInterrupted`)."""

    def __init__(self, cancel: CancelToken,
                 notify: Callable[[str], None] | None = None) -> None:
        self.cancel = cancel
        self.notify = notify
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        name = signal.Signals(signum).name
        if self.cancel.cancelled:
            self.cancel.cancel(f"stopped at once by a second {name}")
            raise KeyboardInterrupt
        self.cancel.cancel(f"stopped by {name}")
        if self.notify is not None:
            self.notify(name)
        if SignalCancel.prompting:
            raise PromptInterrupted

    def __enter__(self) -> SignalCancel:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        SignalCancel.running.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self in SignalCancel.running:
            SignalCancel.running.remove(self)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def drop_output(stream: TextIO) -> None:
    """Point `stream`'s file descriptor at /dev/null: its reader went away.

    Later writes and the flush at interpreter exit then succeed silently (what
    the Python docs advise for a broken pipe), whoever makes them.
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a file (a StringIO), or closed
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def output_closed(stream: TextIO) -> None:
    """The reader of `stream` went away (`normalize run … --json | head -1`).

    Its output is dropped from here on (`drop_output`), and the runs inside a
    `SignalCancel` are cancelled with the reason "stdout closed": each stops at
    its next safe point, saved as `interrupted` (exit status 130) and resumable.
    """
    drop_output(stream)
    for guard in list(SignalCancel.running):
        if not guard.cancel.cancelled:  # a reader leaving is no second Ctrl-C
            guard.cancel.cancel("stdout closed")


def write_out(out: TextIO, text: str) -> None:
    """Write and flush; if the reader went away, `output_closed` and raise on.

    The renderers write through this: the emitter then detaches the renderer
    and journals why, and the run stops as `interrupted`.
    """
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        output_closed(out)
        raise


def write_on(out: TextIO, text: str) -> None:
    """Write and flush; if the reader went away, drop this and all later output, and go on.

    For work that must not stop with its reader: a batch prints its id first so
    that `normalize batch … | head -1` captures it, and then runs to its end.
    """
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        drop_output(out)


def flush_out(out: TextIO) -> None:
    """Flush at the end; a reader that went away is no error any more."""
    try:
        out.flush()
    except BrokenPipeError:
        output_closed(out)


def line_reader(env: Environment) -> Callable[[str], str | None]:
    """Read a line at a prompt (stdin); None at end of input."""

    def read(prompt: str) -> str | None:
        try:
            with at_prompt():
                if env.stdin_tty:
                    env.stderr.write(prompt)
                    env.stderr.flush()
                line = env.stdin.readline()
        except PromptInterrupted:
            if env.stdin_tty:
                env.stderr.write("\n")
            return None
        if not line:
            return None
        return line.rstrip("\n")

    return read


Reader = Callable[[str], str | None]


def held(read: Reader, current: Current) -> Reader:
    """`read`, with the live view taken down while the person types.

    `current()` is the renderer showing the run at the time of the prompt (a
    follow-up run has a new one); its `hold()` also pauses the type-ahead
    reader, so the prompt alone reads the terminal.
    """

    hold = hold_of(current)

    def read_held(prompt: str) -> str | None:
        with hold():
            return read(prompt)

    return read_held


def prompt_reader(env: Environment, workspace: Callable[[], Path], *,
                  current: Current = lambda: None,
                  cancel: CancelToken | None = None) -> Reader:
    """The user driver's reader: prompt-toolkit at a terminal, plain lines from a pipe.

    prompt-toolkit is imported at the first prompt, not before.
    """
    if not (env.stdin_tty and env.stdout_tty):
        return held(line_reader(env), current)
    reader: Reader | None = None

    def read(prompt: str) -> str | None:
        nonlocal reader
        if reader is None:
            from normalize.cli.prompt import PromptReader
            from normalize.homes import data_home

            interrupt = (lambda: cancel.cancel("stopped by Ctrl-C")) if cancel else None
            reader = PromptReader(workspace(), history=data_home(env.env) / "history",
                                  out=env.stdout, hold=hold_of(current),
                                  on_interrupt=interrupt)
        return reader(prompt)

    return read


def hold_of(current: Current) -> Callable[[], contextlib.AbstractContextManager[None]]:
    def hold() -> contextlib.AbstractContextManager[None]:
        renderer = current()
        return renderer.hold() if isinstance(renderer, Prompting) else contextlib.nullcontext()

    return hold
