"""Renderers: subscribers that show the event stream.

    JsonRenderer   one JSON event per line (`--json`); nothing else goes to stdout
    PlainRenderer  one plain line per event worth a line (pipes, `--quiet`, TERM=dumb)
    LiveRenderer   the Rich live view: streamed text, spinners that turn into ✓ / ✗ / ⊘,
                   workflow progress, a footer (turn, tokens, cost, time), a summary panel

Each renderer dispatches on the event classes; the words come from `cli/describe.py`
(one function per message), this module only places and styles them.

The live view never draws from the thread that emits: an event only updates
the view's state and queues finished lines (constant time, under a lock), and
`refresh()` draws the queued lines and the live region at most
`refresh_per_second` times a second (a ticker thread calls it; tests call it
by hand). So a model streaming thousands of deltas a second costs one redraw
per tick, and a fast workflow prints its lines in batches instead of falling
behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO, assert_never

from normalize.cli.console import Environment, flush_out, write_out

# re-exported (MARKS here, first_line below): callers elsewhere import them from this module
from normalize.cli.describe import MARKS as MARKS
from normalize.cli.describe import (
    action_change,
    action_failure,
    add_changes,
    answer_line,
    changed_files,
    changes_hint,
    command_label,
    describe,
    diff_lines,
    ending_summary,
    ending_title,
    error_text,
    interrupted_line,
    message,
    outcome_mark,
    pending_ask,
    progress_lines,
    question_line,
    result_body,
    result_lines,
    run_started,
    said_by_its_result,
    stats,
    step_label,
    step_line,
    summary_line,
)
from normalize.cli.describe import first_line as first_line
from normalize.contract.driver import driver_traits
from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    ActionProgressed,
    ActionStarted,
    BatchEnded,
    BatchResumed,
    BatchStarted,
    CheckpointTaken,
    ChildCollected,
    ChildCreated,
    ContextCompacted,
    DecisionMade,
    Event,
    FallbackUsed,
    HarnessEvent,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    HookRan,
    InputReceived,
    ItemUpdated,
    LoopDetected,
    MemoryProposed,
    ModelReplied,
    ModelRequested,
    ModelRetried,
    Notice,
    ProcessStarted,
    RunEnded,
    RunStarted,
    StepStarted,
    TaskRewound,
    TaskSaved,
    TextDelta,
    ThinkingDelta,
    UnknownEvent,
    WaitingForInput,
)

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.spinner import Spinner
    from rich.text import Text

    from normalize.cli.typeahead import TypeAhead

STYLES = {"success": "green", "error": "red", "blocked": "yellow", "cancelled": "yellow",
          "interrupted": "yellow"}
STATUS_STYLES = {"done": "green", "failed": "red", "waiting": "yellow", "interrupted": "yellow",
                 "limit_reached": "yellow", "stuck": "red"}
FullText = Callable[[str, str], "str | None"]  # (task id, cache id) -> the whole output
WHOLE = 10**9  # rows when there is no terminal: a result is shown whole
TEXT_TAIL_LINES = 6  # lines of streamed text kept in the live region
DIFF_LINES = 40  # lines of an edit's diff shown under its action line
THINKING_LINES = 8  # lines of a reply's thinking kept on screen once the reply is in


class JsonRenderer:
    """One JSON event per line on stdout: the versioned event form."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        line = event.to_json() + "\n"
        with self._lock:
            write_out(self.out, line)

    def close(self) -> None:
        flush_out(self.out)


class Results:
    """Whole results for a person at the prompt: on in runs of the user driver.

    `full_text` finds an output the preview cut (the task's result cache);
    `rows` is how many lines a result may take before it is cut.
    """

    def __init__(self, full_text: FullText | None = None,
                 rows: Callable[[], int] | None = None) -> None:
        self.full_text = full_text
        self.rows = rows or (lambda: 40)
        self.on = False

    def seen(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.on = driver_traits(event.driver).shows_results

    def body(self, event: ActionFinished) -> list[str]:
        """The lines to show under the action, or none."""
        if not self.on or (event.tool in ("edit", "write") and event.status == "success"):
            return []
        text = event.preview
        if event.cache_id and self.full_text is not None:
            text = self.full_text(event.task_id, event.cache_id) or text
        if not text.strip():
            return []
        return result_body(text, self.rows() - 4, event.cache_id)


def paused(reader: TypeAhead | None) -> contextlib.AbstractContextManager[None]:
    """The type-ahead `reader` paused (it gives the terminal back), or nothing when None."""
    return reader.paused() if reader is not None else contextlib.nullcontext()


class PlainRenderer:
    """Plain lines, for pipes, `--quiet` and dumb terminals."""

    def __init__(self, out: TextIO | None = None, *, quiet: bool = False,
                 results: Results | None = None) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self.results = results or Results()
        self._lock = threading.Lock()
        self.input: TypeAhead | None = None
        self.changes: dict[str, list[int]] = {}  # path -> [+, -] this run
        self.resumed = False

    def attach_input(self, reader: TypeAhead | None) -> None:
        """The terminal reader to pause while a prompt has the terminal (or None)."""
        self.input = reader

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Give a prompt the terminal: the type-ahead reader pauses meanwhile."""
        with paused(self.input):
            yield

    def __call__(self, event: Event) -> None:
        self.results.seen(event)
        if isinstance(event, CheckpointTaken):
            add_changes(self.changes, event)
        elif isinstance(event, RunStarted):
            self.resumed = event.resumed
        if self.quiet and not isinstance(event, RunEnded | WaitingForInput):
            return
        line = self.ending(event) if isinstance(event, RunEnded) else describe(event)
        if isinstance(event, ActionFinished) and line is not None:
            body = self.results.body(event) or diff_lines(event, DIFF_LINES)  # a CI log's diffs
            if body:
                line = "\n".join([line.split("\n")[0], *(f"    {b}" for b in body)])
        if line is not None:
            with self._lock:
                write_out(self.out, line + "\n")

    def ending(self, event: RunEnded) -> str:
        """The run's last lines: its figures and summary, then what to do with its changes."""
        lines = [summary_line(event, self.resumed)]
        if event.result is not None:
            lines += ["  result:", *(f"    {line}" for line in result_lines(event.result))]
        if self.changes:
            lines.append(f"  {changes_hint(event.task_id)}")
        return "\n".join(lines)

    def close(self) -> None:
        flush_out(self.out)


# -- the live view ---------------------------------------------------------------------------


@dataclass
class ViewState:
    """What the live region shows; updated by events, read by `refresh`."""

    task_id: str = ""
    resumed: bool = False
    step: str = ""
    turn: int = 0
    max_turns: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    running: dict[str, tuple[str, float]] = field(default_factory=dict)
    progress: dict[str, ActionProgressed] = field(default_factory=dict)  # a program's tail
    started: float | None = None
    changes: dict[str, list[int]] = field(default_factory=dict)  # path -> [+, -]
    typing: bool = False  # a person can type a line for the model (see cli/typeahead.py)
    typed: str = ""
    waiting: int = 0  # typed lines the model has not seen yet


def _tail(chunks: list[str], rows: int, width: int) -> str:
    """The last `rows` screen rows of the text made of `chunks`, cut at `width`."""
    text = "".join(chunks)
    if len(chunks) > 64:  # keep the buffer short under a fast stream
        chunks[:] = [text[-rows * width * 4:]]
    out: list[str] = []
    for line in reversed(text.rstrip("\n").splitlines()):
        pieces = [line[i:i + width] for i in range(0, len(line), width)] or [""]
        out[:0] = pieces[-(rows - len(out)):]
        if len(out) >= rows:
            break
    return "\n".join(out)


TYPE_AHEAD_HINT = "  (type a line and press Enter: the model reads it at its next turn)"


OtherEvent = (ActionStarted | ActionProgressed | ActionFinished | ActionInterrupted
              | ModelRetried | Notice | FallbackUsed | LoopDetected | ContextCompacted
              | HarnessToolCalled | HarnessToolFinished | MemoryProposed | ModelRequested
              | ProcessStarted | ChildCreated | ChildCollected | TaskSaved | TaskRewound
              | TextDelta | ThinkingDelta | HookRan | UnknownEvent | HarnessSession
              | HarnessEvent | BatchStarted | BatchResumed | ItemUpdated | BatchEnded)
"""The events the live view's `_apply_other` takes: actions', notices', and the unshown."""


class LiveRenderer:
    """The Rich live view of a run.

    `auto_refresh=False` leaves drawing to whoever calls `refresh()` (tests);
    `clock` gives the elapsed times (injected in tests).
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        refresh_per_second: float = 10.0,
        auto_refresh: bool = True,
        clock: Callable[[], float] = time.monotonic,
        results: Results | None = None,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.results = results or Results(rows=lambda: self.console.height)
        self.live = Live(console=self.console, auto_refresh=False, transient=True,
                         redirect_stdout=False, redirect_stderr=False)
        self.interval = 1.0 / refresh_per_second
        self.auto_refresh = auto_refresh
        self.clock = clock
        self.state = ViewState()
        self._queue: list[RenderableType] = []
        self._said: list[str] = []  # lines from a signal handler, printed at the next redraw
        self._spinners: dict[str, Spinner] = {}
        self._lock = threading.Lock()  # guards state and queue; held only briefly
        self._draw = threading.RLock()  # one drawer at a time
        self._started = False
        self._held = False
        self._ended = False
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self.input: TypeAhead | None = None

    def attach_input(self, reader: TypeAhead | None) -> None:
        """The terminal reader to pause while a prompt has the terminal (or None)."""
        self.input = reader
        with self._lock:
            self.state.typing = reader is not None
            if reader is None:
                self.state.typed, self.state.waiting = "", 0

    def typing(self, line: str, waiting: int) -> None:
        """The line being typed and the lines waiting for the model, drawn in the footer."""
        with self._lock:
            self.state.typed, self.state.waiting = line, waiting
        if self._started:
            self.refresh()

    # -- events: state changes only ------------------------------------------------------

    def __call__(self, event: Event) -> None:
        self.results.seen(event)
        if isinstance(event, TextDelta | ThinkingDelta):
            with self._lock:
                (self.state.text if isinstance(event, TextDelta) else self.state.thinking).append(
                    event.text)
            self._start()
            return
        with self._lock:
            self._apply(event)
        if isinstance(event, RunEnded):
            self.close()
        elif self._ended:
            self.refresh()  # after the run: plain prints, no live region
        else:
            self._start()

    def _apply(self, event: Event) -> None:
        from rich.text import Text

        s = self.state
        if s.started is None:
            s.started = self.clock()
        if isinstance(event, ModelRequested | DecisionMade | ActionStarted):
            s.turn = event.turn
        add = self._queue.append
        match event:
            case RunStarted():
                self._run_started(event)
            case StepStarted():
                s.step = step_label(event)
                add(Text(step_line(event), style="bold"))
            case DecisionMade():
                if event.thinking:
                    add(Text(event.thinking.strip()))
                s.text.clear()
            case ModelReplied():
                self._model_replied(event)
            case WaitingForInput():
                add(Text(question_line(event), style="bold yellow"))
            case InputReceived():
                add(Text(answer_line(event), style="dim"))
                if event.kind == "typed":  # the model has it: the footer stops counting it
                    s.waiting = max(0, s.waiting - 1)
            case CheckpointTaken():
                add_changes(s.changes, event)
            case RunEnded():
                s.running.clear()
                add(summary_panel(event, s.changes, s.resumed))
                if event.result is not None:  # after the panel, whole: a person copies it
                    add(Text("\n".join(result_lines(event.result))))
            case _:
                self._apply_other(event)

    def _run_started(self, event: RunStarted) -> None:
        """The run's header (and the type-ahead hint); the footer's counters from the task."""
        from rich.text import Text

        s = self.state
        s.task_id = event.task_id
        s.resumed = event.resumed
        s.turn = event.turn
        s.max_turns = event.max_turns
        s.input_tokens = event.input_tokens
        s.output_tokens = event.output_tokens
        s.cost_usd = event.cost_usd
        self._queue.append(Text.assemble(*run_started(event, 70)))
        if s.typing:
            self._queue.append(Text(TYPE_AHEAD_HINT, style="dim"))

    def _model_replied(self, event: ModelReplied) -> None:
        """A reply's usage counted, its streamed text done with, its thinking shown dim."""
        s = self.state
        s.input_tokens += event.input_tokens
        s.output_tokens += event.output_tokens
        s.cost_usd += event.cost_usd
        s.text.clear()
        s.thinking.clear()
        if event.thinking:
            self._queue.append(_dim_block(event.thinking, THINKING_LINES))

    def _apply_other(self, event: OtherEvent) -> None:
        """An action's events and a notice's message, shown; what the view leaves out."""
        from rich.text import Text

        s = self.state
        add = self._queue.append
        match event:
            case ActionStarted():
                s.running[event.key] = (command_label(event, 70), self.clock())
            case ActionProgressed():
                if event.key in s.running:
                    s.progress[event.key] = event
            case ActionFinished() if pending_ask(event):
                s.running.pop(event.key, None)
            case ActionFinished():
                s.running.pop(event.key, None)
                self._add_finished(event)
            case ActionInterrupted():
                s.running.pop(event.key, None)
                if not said_by_its_result(event):
                    add(Text(interrupted_line(event, 70), style="yellow"))
            case (ModelRetried() | Notice() | FallbackUsed() | LoopDetected() | ContextCompacted()
                  | HarnessToolCalled() | HarnessToolFinished() | MemoryProposed()):
                if isinstance(event, ModelRetried):  # the streamed text so far is void
                    s.text.clear()
                    s.thinking.clear()
                self._add_message(event)
            case (ModelRequested() | ProcessStarted() | ChildCreated() | ChildCollected()
                  | TaskSaved() | TaskRewound() | TextDelta() | ThinkingDelta()
                  | HookRan() | UnknownEvent() | HarnessSession() | HarnessEvent()
                  | BatchStarted() | BatchResumed() | ItemUpdated() | BatchEnded()):
                pass
            case _:
                assert_never(event)

    def _add_finished(self, event: ActionFinished) -> None:
        """A finished action's block, then its result's lines (red when it failed), its diff."""
        from rich.text import Text

        body = self.results.body(event)
        self._queue.append(action_block(event, change=not body))
        if body:
            style = "" if event.status == "success" else "red"
            self._queue.append(Text("\n".join(body), style=style))
        diff = diff_block(event)
        if diff is not None:
            self._queue.append(diff)

    def _add_message(self, event: Event) -> None:
        """An event's message line, yellow when it warns, dim otherwise (none: nothing)."""
        from rich.text import Text

        line = message(event)
        if line is not None:
            self._queue.append(Text(line.text, style="yellow" if line.warning else "dim"))

    # -- drawing -------------------------------------------------------------------------

    def view(self) -> RenderableType:
        """The live region: streamed text, running actions, the footer."""
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        width = max(20, self.console.width)
        with self._lock:
            s = self.state
            rows: list[RenderableType] = []
            if s.thinking:
                rows.append(Text(_tail(s.thinking, TEXT_TAIL_LINES, width), style="dim italic"))
            if s.text:
                rows.append(Text(_tail(s.text, TEXT_TAIL_LINES, width)))
            now = self.clock()
            for key, (command, started) in s.running.items():
                text = Text.assemble(command, (f"  {now - started:.1f}s", "dim"))
                spinner = self._spinners.get(key)
                if spinner is None:  # one per action, kept: a new one would never turn
                    spinner = self._spinners[key] = Spinner("dots", text=text)
                spinner.update(text=text)
                rows.append(spinner)
                shown = progress_lines(s.progress[key], width) if key in s.progress else []
                if shown:
                    rows.append(Text("\n".join(shown), style="dim"))
            for gone in set(self._spinners) - set(s.running):
                del self._spinners[gone]
            for gone in set(s.progress) - set(s.running):
                del s.progress[gone]
            rows.append(self._footer(now))
        return Group(*rows)

    def _footer(self, now: float) -> Text:
        from rich.text import Text

        s = self.state
        turn = f"turn {s.turn + 1}" + (f"/{s.max_turns}" if s.max_turns else "")
        parts = [p for p in (s.step, turn) if p]
        if s.input_tokens or s.output_tokens:
            parts.append(f"{s.input_tokens:,} in / {s.output_tokens:,} out")
        if s.cost_usd:
            parts.append(f"${s.cost_usd:.4f}")
        parts.append(f"{now - (s.started if s.started is not None else now):.1f}s")
        if s.waiting:
            parts.append(f"{s.waiting} line{'s' if s.waiting > 1 else ''} for the next turn")
        footer = Text(" · ".join(parts), style="dim")
        if s.typed:
            footer.append_text(Text.assemble("\n› ", (s.typed, "bold"), "▏"))
        return footer

    def say(self, text: str) -> bool:
        """Print `text` above the live region at its next redraw (safe in a signal handler:
        no lock is taken); False when there is no live region to keep it above."""
        if not self._started or self._ended or self._held:
            return False
        self._said.append(text)  # one atomic append; the ticker's refresh prints it
        return True

    def refresh(self) -> None:
        """Print the queued lines and redraw the live region, in one write."""
        with self._draw:
            with self._lock:
                lines = self._take()
            if not self._started or self._held:
                self._print(lines)
                return
            view = self.view()
            with self.console:  # one buffered write: no flicker between the two
                self._print(lines)
                self.live.update(view, refresh=True)

    def _print(self, lines: list[RenderableType]) -> None:
        if lines:
            from rich.console import Group

            self.console.print(Group(*lines), highlight=False, soft_wrap=False)

    def _start(self) -> None:
        if self._started or self._held or self._ended:
            return
        with self._draw:
            if self._started or self._held or self._ended:
                return
            self.live.start()
            self._started = True
            if self.auto_refresh and self._ticker is None:
                atexit.register(self.close)
                self._ticker = threading.Thread(target=self._tick, name="normalize-live",
                                                daemon=True)
                self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Take the live region down while a person types at a prompt; put it back after.

        The type-ahead reader (if any) pauses meanwhile: the prompt owns the terminal.
        """
        with paused(self.input), self._hold():
            yield

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        with self._draw:
            self.refresh()
            if self._started:
                self.live.stop()
                self._started = False
            self._held = True
        paused = self.clock()
        try:
            yield
        finally:
            with self._draw:
                self._held = False
                waited = self.clock() - paused
                with self._lock:  # the time a person took at a prompt is not the action's
                    for key, (command, started) in self.state.running.items():
                        self.state.running[key] = (command, started + waited)

    def _take(self) -> list[RenderableType]:
        """The lines to print now: what a signal handler said first, then the queue."""
        from rich.text import Text

        said = [self._said.pop(0) for _ in range(len(self._said))]  # atomic pops
        lines, self._queue = [*(Text(t, style="yellow") for t in said), *self._queue], []
        return lines

    def close(self) -> None:
        """Draw what is queued, take the live region down, stop the ticker (idempotent)."""
        self._stop.set()
        with self._draw:
            self._ended = True
            with self._lock:
                lines = self._take()
            if self._started:
                self.live.stop()
                self._started = False
            self._print(lines)
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=1.0)


def action_line(event: ActionFinished, *, change: bool = True) -> Text:
    """`✓ view a.py  0.01s  first line of the output`, and the reason under a failure."""
    from rich.text import Text

    style = STYLES.get(event.status, "")
    line = Text.assemble((outcome_mark(event), f"bold {style}".strip()), " ",
                         command_label(event, 60), (f"  {event.duration:.2f}s", "dim"))
    if not change:
        return line
    if event.status == "success":
        what = action_change(event)
        if what:
            line.append(f"  {what}", style="dim")
    else:
        reason = action_failure(event).replace("\n", "\n    ")
        line.append(f"\n    {reason}", style=style)
    return line


def action_block(event: ActionFinished, *, change: bool = True) -> RenderableType:
    """`action_line`, with a failure's reason indented under it even when it wraps."""
    if event.status == "success":
        return action_line(event, change=change)
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    head = action_line(event, change=False)
    reason = Text(action_failure(event), style=STYLES.get(event.status, ""))
    return Group(head, Padding(reason, (0, 0, 0, 4)))


def diff_block(event: ActionFinished, limit: int = DIFF_LINES) -> RenderableType | None:
    """An edit's unified diff, syntax-highlighted and indented, at most `limit` lines."""
    from rich.padding import Padding
    from rich.syntax import Syntax

    shown = diff_lines(event, limit)
    if not shown:
        return None
    code = Syntax("\n".join(shown), "diff", theme="ansi_dark", background_color="default",
                  word_wrap=False)
    return Padding(code, (0, 0, 0, 4))


def _dim_block(text: str, limit: int) -> Text:
    from rich.text import Text

    lines = text.strip().splitlines()
    if len(lines) > limit:
        lines = [*lines[: limit - 1], f"… ({len(lines) - limit + 1} more lines)"]
    return Text("\n".join(lines), style="dim italic")


PANEL_WIDTH = 80
"""The end panel's width (the terminal's when narrower): the same for every ending."""


def summary_panel(event: RunEnded, changes: dict[str, list[int]] | None = None,
                  resumed: bool = False) -> RenderableType:
    """The final panel: how the run ended, its summary, error, figures and changed files."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    rows: list[RenderableType] = []
    if ending_summary(event):
        rows.append(Text(event.summary.strip()))
    if event.error:
        rows.append(Text(error_text(event.error.strip()), style="red"))
    rows.append(Text(" · ".join(stats(event, resumed)), style="dim"))
    for line in changed_files(changes or {}):
        rows.append(Text(line, style="" if line.startswith("files") else "cyan"))
    if changes:
        rows.append(Text(changes_hint(event.task_id), style="dim"))
    style = STATUS_STYLES.get(event.status, "")
    title = Text.assemble((ending_title(event), f"bold {style}".strip()),
                          (f" · task {event.task_id}", "dim"))
    return Panel(Group(*rows), title=title, title_align="left", border_style=style or "none",
                 expand=True, width=PANEL_WIDTH)  # one width whatever the ending says


def make_renderer(env: Environment, *, json_output: bool, quiet: bool,
                  full_text: FullText | None = None,
                  ) -> JsonRenderer | PlainRenderer | LiveRenderer:
    """The subscriber that shows this run: JSON lines, plain lines, or the live view.

    `full_text` finds a whole output by its cache id (see `Results`).
    """
    if json_output:
        return JsonRenderer(env.stdout)
    if quiet or env.plain:
        return PlainRenderer(env.stdout, quiet=quiet,
                             results=Results(full_text, rows=lambda: _terminal_rows(env)))
    from rich.console import Console

    console = Console(file=env.stdout)
    return LiveRenderer(console, results=Results(full_text, rows=lambda: console.height))


def cache_reader(get_store: Callable[[], object | None]) -> FullText:
    """A `FullText` over the tasks' result caches (the run's store, else the default one)."""

    def read(task_id: str, cache_id: str) -> str | None:
        from normalize.execution.cache import make_cache
        from normalize.redact import inert
        from normalize.store import TaskStore

        store = get_store()
        if not isinstance(store, TaskStore):
            store = TaskStore()
        try:
            text = make_cache("persistent", directory=store.cache_dir(task_id)).retrieve(cache_id)
        except (OSError, ValueError):
            return None
        return None if text is None else inert(text)  # redacted at the cache, inert here

    return read


def _terminal_rows(env: Environment) -> int:
    """How many rows a result may take: the terminal's height, or all of them in a pipe."""
    if not env.stdout_tty:
        return WHOLE
    try:
        return os.get_terminal_size(env.stdout.fileno()).lines
    except (OSError, ValueError):
        return WHOLE
