"""What a person types while a run works: each line ended with Enter is queued for the model.

    with typed_lines(env, options, renderer) as queue:   # queue is None off a terminal
        outcome = run_task(task, options)
    leftover = queue.drain() if queue else []          # typed after the model's last turn

The LLM driver drains the queue at the start of its next turn (see
`normalize.drivers.llm.LineQueue`), so a line reaches the model at the next
request, never in the middle of one.

Under the live view the terminal is put in non-canonical mode without echo
(signals stay on: Ctrl-C still stops the run) and the line being typed is drawn
in the view's footer, with the usual editing keys: Backspace, Ctrl-U (the whole
line), Ctrl-W (a word); arrow and function keys are ignored. A plain terminal
keeps the kernel's own line editing and echo.

One reader owns the terminal at a time: before any prompt takes it (an
approval, a question, the user driver's prompt) the renderer's `hold()` pauses
the reader and restores the terminal's settings, and resumes it after. What was
typed but not yet sent is kept across the pause.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import termios
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from normalize.cli.console import Prompting, ShowsTyping

if TYPE_CHECKING:
    from normalize.cli.console import Environment, Renderer
    from normalize.contract.driver import LineQueue
    from normalize.runner import RunOptions

Show = Callable[[str, int], None]
"""Told the line being typed and how many lines wait for the model, after every change."""

ERASE = frozenset({"\x7f", "\x08"})
KILL_LINE = "\x15"  # Ctrl-U
KILL_WORD = "\x17"  # Ctrl-W
ESCAPE = "\x1b"
MAX_LINE = 4_000


class TypeAhead:
    """Reads the terminal `fd` in a thread while started; complete lines go to `queue`.

    `edit=True` does the line editing itself (no echo, drawn by `show`);
    `edit=False` leaves the terminal in canonical mode and takes whole lines.
    """

    def __init__(self, fd: int, queue: LineQueue, *, edit: bool, show: Show | None = None) -> None:
        self.fd = fd
        self.queue = queue
        self.edit = edit
        self.show = show or (lambda _line, _waiting: None)
        self.line = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._escape = 0  # 0: none, 1: after ESC, 2: inside a CSI/SS3 sequence
        self._saved: list[Any] | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None
        self._lock = threading.Lock()

    # -- owning the terminal -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Take the terminal: set its mode (when editing) and start reading."""
        if self._thread is not None:
            return
        if self.edit:
            try:
                self._saved = termios.tcgetattr(self.fd)
                attrs = termios.tcgetattr(self.fd)
                attrs[3] &= ~(termios.ICANON | termios.ECHO)
                attrs[6][termios.VMIN] = 1
                attrs[6][termios.VTIME] = 0
                termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
            except termios.error:
                self._saved = None
                return  # not a terminal after all: nothing is read
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._read, name="normalize-typeahead",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reading and give the terminal back as it was (idempotent)."""
        thread, wake = self._thread, self._wake
        if thread is None or wake is None:
            return
        os.write(wake[1], b"x")
        thread.join()
        for end in wake:
            os.close(end)
        self._thread = self._wake = None
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The terminal as it was, for a prompt; reading resumes after (if it ran before)."""
        was_running = self.running
        self.stop()
        try:
            yield
        finally:
            if was_running:
                self.start()

    # -- reading -------------------------------------------------------------------------

    def _read(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            try:
                ready, _, _ = select.select([self.fd, wake[0]], [], [])
            except (OSError, ValueError):
                return
            if wake[0] in ready:
                return
            try:
                data = os.read(self.fd, 1024)
            except OSError:
                return
            if not data:
                return  # end of input: nothing more will be typed
            self.feed(data)

    def feed(self, data: bytes) -> None:
        """Take typed bytes: edit the line, queue each completed one, tell `show`."""
        text = self._decoder.decode(data)
        with self._lock:
            for char in text:
                self._key(char)
            line, waiting = self.line, len(self.queue)
        self.show(line, waiting)

    def _key(self, char: str) -> None:
        if self._escape:  # skip an escape sequence: ESC [ params final, ESC O x, ESC x
            if self._escape == 1:
                self._escape = 2 if char in "[O" else 0
            elif "@" <= char <= "~":
                self._escape = 0
            return
        if char in "\r\n":
            if self.line.strip():
                self.queue.put(self.line)
            self.line = ""
        elif not self.edit:
            self.line += char
        elif char == ESCAPE:
            self._escape = 1
        elif char in ERASE:
            self.line = self.line[:-1]
        elif char == KILL_LINE:
            self.line = ""
        elif char == KILL_WORD:
            kept = self.line.rstrip()
            self.line = kept[:kept.rfind(" ") + 1]
        elif char >= " " and len(self.line) < MAX_LINE:
            self.line += char


@contextlib.contextmanager
def typed_lines(env: Environment, options: RunOptions, renderer: Renderer, *,
                model: bool = True) -> Iterator[LineQueue | None]:
    """While the block runs, lines typed at the terminal queue for the model.

    Yields the queue (a `LineQueue`, also lent to the driver as the `inbox`
    service), or None when stdin or stdout is no terminal or the renderer
    cannot hand the terminal to a prompt (JSON lines), or when no model drives
    the task (`model=False`: a person at the prompt types commands there).
    """
    if not (model and env.stdin_tty and env.stdout_tty) or not isinstance(renderer, Prompting):
        yield None
        return
    from normalize.contract.driver import LineQueue

    queue = options.services.inbox
    if queue is None:
        queue = options.services.inbox = LineQueue()
    show = renderer.typing if isinstance(renderer, ShowsTyping) else None
    ahead = TypeAhead(env.stdin.fileno(), queue, edit=show is not None, show=show)
    renderer.attach_input(ahead)
    ahead.start()
    try:
        yield queue
    finally:
        ahead.stop()
        renderer.attach_input(None)


def report_unsent(env: Environment, task_id: str, lines: list[str]) -> None:
    """Say which typed lines no turn of the model read: never dropped silently."""
    if lines:
        env.stderr.write(f"normalize: not sent (the run had ended): {' / '.join(lines)}; "
                         f'give it with normalize resume {task_id} "…"\n')
        env.stderr.flush()
