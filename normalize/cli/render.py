"""Renderers: subscribers that show the event stream.

    JsonRenderer   one JSON event per line (`--json`); nothing else goes to stdout
    PlainRenderer  one plain line per event worth a line (pipes, `--quiet`, NO_COLOR, TERM=dumb)
    LiveRenderer   the Rich live view: streamed text, spinners that turn into ✓ / ✗ / ⊘,
                   workflow progress, a footer (turn, tokens, cost, time), a summary panel

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
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from normalize.cli.console import flush_out, write_out
from normalize.events import BaseEvent

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

MARKS = {"success": "✓", "error": "✗", "blocked": "⊘", "cancelled": "⊘", "interrupted": "?"}
STYLES = {"success": "green", "error": "red", "blocked": "yellow", "cancelled": "yellow",
          "interrupted": "yellow"}
STATUS_STYLES = {"done": "green", "failed": "red", "waiting": "yellow", "interrupted": "yellow",
                 "limit_reached": "yellow", "stuck": "red"}
TEXT_TAIL_LINES = 6  # lines of streamed text kept in the live region
DIFF_LINES = 40  # lines of an edit's diff shown under its action line
THINKING_LINES = 8  # lines of a reply's thinking kept on screen once the reply is in


class JsonRenderer:
    """One JSON event per line on stdout: the versioned event form."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, event: BaseEvent) -> None:
        line = event.to_json() + "\n"
        with self._lock:
            write_out(self.out, line)

    def close(self) -> None:
        flush_out(self.out)


def first_line(text: str, width: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def describe(event: BaseEvent) -> str | None:
    """A plain one-line description of an event, or None for noise."""
    d: dict[str, Any] = event.to_dict()
    kind = event.type
    if kind == "run_started":
        how = "resumed" if d["resumed"] else "started"
        return f"task {d['task_id']} {how}: {first_line(d['goal'])} ({d['driver']})"
    if kind == "step_started":
        return f"→ {step_label(d)}"
    if kind == "action_finished":
        mark = MARKS.get(d["status"], "·")
        line = f"  {mark} {command_label(d, 80)}  ({d['duration']:.2f}s)"
        detail = d.get("error") if d["status"] != "success" else None
        if detail:
            line += f"\n      {first_line(detail, 120)}"
        return line
    if kind == "action_interrupted":
        what = "runs again" if d["rerun"] else "outcome unknown"
        return f"  ? {command_label(d, 80)}: interrupted, {what}"
    if kind == "waiting_for_input":
        return f"? waiting for an answer: {d['question']}"
    if kind == "notice":
        if d["level"] == "error":
            return None
        return f"  ! {first_line(d['message'], 120)}" if d["level"] == "warning" \
            else f"  · {first_line(d['message'], 120)}"
    if kind == "decision_made" and d.get("thinking"):
        return "  " + first_line(d["thinking"], 120)
    if kind == "fallback_used":
        return f"  ! falling back from {d['from_model']} to {d['to_model']}: {d['reason']}"
    if kind == "model_retried":
        return f"  ! model call failed ({d['reason']}); retry {d['attempt']} in {d['delay']:.1f}s"
    if kind == "loop_detected":
        return f"  ! loop detected: {first_line(d['command'], 80)} repeated {d['repeats']}×"
    if kind == "run_ended":
        return summary_line(d)
    return None


def step_label(d: dict[str, Any]) -> str:
    """`step 2/5: tests`, or `state fixing`, from a step_started event."""
    if d.get("state"):
        return f"state {d['state']}"
    if d.get("total"):
        return f"step {d['index']}/{d['total']}: {d['name']}"
    return f"step {d['name']}"


def stats(d: dict[str, Any]) -> list[str]:
    """The figures of a run_ended event: turns, actions, time, tokens, cost."""
    parts = [f"{d['turns']} turns", f"{d['actions']} actions", f"{d['duration']:.1f}s"]
    if d.get("input_tokens") or d.get("output_tokens"):
        parts.append(f"{d['input_tokens']:,} in / {d['output_tokens']:,} out tokens")
    if d.get("cost_usd"):
        parts.append(f"${d['cost_usd']:.4f}")
    return parts


def summary_line(d: dict[str, Any]) -> str:
    line = f"task {d['task_id']} " + " · ".join([d["status"], *stats(d)])
    if d.get("summary"):
        line += f"\n  {first_line(d['summary'], 200)}"
    if d.get("error"):
        line += f"\n  error: {first_line(d['error'], 200)}"
    return line


class PlainRenderer:
    """Plain lines, for pipes, `--quiet`, `NO_COLOR` and dumb terminals."""

    def __init__(self, out: TextIO | None = None, *, quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self._lock = threading.Lock()

    def __call__(self, event: BaseEvent) -> None:
        if self.quiet and event.type not in ("run_ended", "waiting_for_input"):
            return
        line = describe(event)
        if line is not None:
            with self._lock:
                write_out(self.out, line + "\n")

    def close(self) -> None:
        flush_out(self.out)


# -- the live view ---------------------------------------------------------------------------


@dataclass
class ViewState:
    """What the live region shows; updated by events, read by `refresh`."""

    task_id: str = ""
    step: str = ""
    turn: int = 0
    max_turns: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    running: dict[str, tuple[str, float]] = field(default_factory=dict)
    started: float | None = None


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
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.live = Live(console=self.console, auto_refresh=False, transient=True,
                         redirect_stdout=False, redirect_stderr=False)
        self.interval = 1.0 / refresh_per_second
        self.auto_refresh = auto_refresh
        self.clock = clock
        self.state = ViewState()
        self._queue: list[RenderableType] = []
        self._lock = threading.Lock()  # guards state and queue; held only briefly
        self._draw = threading.RLock()  # one drawer at a time
        self._started = False
        self._held = False
        self._ended = False
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    # -- events: state changes only ------------------------------------------------------

    def __call__(self, event: BaseEvent) -> None:
        kind = event.type
        if kind in ("text_delta", "thinking_delta"):
            text: str = getattr(event, "text", "")
            with self._lock:
                (self.state.text if kind == "text_delta" else self.state.thinking).append(text)
            self._start()
            return
        d = event.to_dict()
        with self._lock:
            self._apply(kind, d)
        if kind == "run_ended":
            self.close()
        elif self._ended:
            self.refresh()  # after the run: plain prints, no live region
        else:
            self._start()

    def _apply(self, kind: str, d: dict[str, Any]) -> None:
        from rich.text import Text

        s = self.state
        if s.started is None:
            s.started = self.clock()
        if kind in ("model_requested", "decision_made", "action_started"):
            s.turn = d["turn"]
        add = self._queue.append
        if kind == "run_started":
            s.task_id = d["task_id"]
            s.turn = d.get("turn", 0)
            s.max_turns = d.get("max_turns")
            s.input_tokens = d.get("input_tokens", 0)
            s.output_tokens = d.get("output_tokens", 0)
            s.cost_usd = d.get("cost_usd", 0.0)
            how = "resumed" if d["resumed"] else "started"
            add(Text.assemble(("task ", "bold"), (d["task_id"], "bold cyan"),
                              f" {how}: {first_line(d['goal'], 70)} ",
                              (f"({d['driver']})", "dim")))
        elif kind == "step_started":
            s.step = step_label(d)
            add(Text(f"→ {s.step}", style="bold"))
        elif kind == "decision_made":
            if d.get("thinking"):
                add(Text(d["thinking"].strip()))
            s.text.clear()
        elif kind == "model_replied":
            s.input_tokens += d["input_tokens"]
            s.output_tokens += d["output_tokens"]
            s.cost_usd += d["cost_usd"]
            s.text.clear()
            s.thinking.clear()
            if d.get("thinking"):
                add(_dim_block(d["thinking"], THINKING_LINES))
        elif kind == "model_retried":
            s.text.clear()
            s.thinking.clear()
            add(Text(describe_text(kind, d) or "", style="yellow"))
        elif kind == "action_started":
            s.running[d["key"]] = (command_label(d, 70), self.clock())
        elif kind == "action_finished":
            s.running.pop(d["key"], None)
            add(action_line(d))
            if d["tool"] in ("edit", "write") and d["status"] == "success" and d["preview"]:
                diff = diff_block(d["preview"])
                if diff is not None:
                    add(diff)
        elif kind == "action_interrupted":
            s.running.pop(d["key"], None)
            what = "runs again" if d["rerun"] else "outcome unknown"
            add(Text(f"? {command_label(d, 70)}: interrupted, {what}",
                     style="yellow"))
        elif kind == "waiting_for_input":
            add(Text(f"? {d['question']}", style="bold yellow"))
        elif kind == "input_received":
            add(Text(f"  ↳ {first_line(d['answer'], 100)}", style="dim"))
        elif kind == "run_ended":
            s.running.clear()
            add(summary_panel(d))
        else:
            line = describe_text(kind, d)
            if line:
                style = "yellow" if line.startswith("!") else "dim"
                add(Text(line, style=style))

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
            for command, started in s.running.values():
                rows.append(Spinner("dots", text=Text.assemble(
                    command, (f"  {now - started:.1f}s", "dim"))))
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
        return Text(" · ".join(parts), style="dim")

    def refresh(self) -> None:
        """Print the queued lines and redraw the live region, in one write."""
        with self._draw:
            with self._lock:
                lines, self._queue = self._queue, []
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
        """Take the live region down while a person types at a prompt; put it back after."""
        with self._draw:
            self.refresh()
            if self._started:
                self.live.stop()
                self._started = False
            self._held = True
        try:
            yield
        finally:
            with self._draw:
                self._held = False

    def close(self) -> None:
        """Draw what is queued, take the live region down, stop the ticker (idempotent)."""
        self._stop.set()
        with self._draw:
            self._ended = True
            with self._lock:
                lines, self._queue = self._queue, []
            if self._started:
                self.live.stop()
                self._started = False
            self._print(lines)
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=1.0)


def describe_text(kind: str, d: dict[str, Any]) -> str | None:
    """A one-line text for the events that have no special look in the live view."""
    if kind == "notice":
        if d["level"] == "error":
            return None
        return f"{'!' if d['level'] == 'warning' else '·'} {first_line(d['message'], 120)}"
    if kind == "fallback_used":
        return f"! falling back from {d['from_model']} to {d['to_model']}: {d['reason']}"
    if kind == "model_retried":
        return f"! model call failed ({d['reason']}); retry {d['attempt']} in {d['delay']:.1f}s"
    if kind == "loop_detected":
        return f"! loop detected: {first_line(d['command'], 80)} repeated {d['repeats']}×"
    if kind == "context_compacted":
        return (f"· context compacted: {d['before_chars']:,} → {d['after_chars']:,} characters "
                f"({d['results_compacted']} results)")
    return None


def command_label(d: dict[str, Any], width: int) -> str:
    """An action's command as one line: its first line, without a heredoc marker."""
    line = first_line(d.get("command") or d.get("tool") or "", 10_000)
    if heredoc_marker(line):
        line = line[: line.rfind("<<")].rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def heredoc_marker(line: str) -> bool:
    marker = line.rfind("<<")
    return marker >= 0 and line[marker + 2:].strip().lstrip("-").strip("'\"").isidentifier()


def action_line(d: dict[str, Any]) -> Text:
    """`✓ view a.py  0.01s  first line of the output`, and the error under a failure."""
    from rich.text import Text

    status = d["status"]
    style = STYLES.get(status, "")
    line = Text.assemble((MARKS.get(status, "·"), f"bold {style}".strip()), " ",
                         command_label(d, 60),
                         (f"  {d['duration']:.2f}s", "dim"))
    data = d.get("data") or {}
    if status == "success":
        if "added" in data and "removed" in data:
            line.append(f"  +{data['added']} -{data['removed']}", style="dim")
        elif d["tool"] not in ("edit", "write") and d.get("preview"):
            line.append(f"  {first_line(d['preview'], 40)}", style="dim")
    else:
        detail = d.get("error") or first_line(d.get("preview") or "", 100) or status
        line.append(f"\n    {first_line(detail, 100)}", style=style)
    return line


def diff_block(text: str, limit: int = DIFF_LINES) -> RenderableType | None:
    """An edit's unified diff, syntax-highlighted and indented, at most `limit` lines."""
    from rich.padding import Padding
    from rich.syntax import Syntax

    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("--- ")), None)
    if start is None:
        return None
    shown = lines[start:start + limit]
    more = len(lines) - start - len(shown)
    if more > 0:
        shown.append(f"… {more} more lines")
    code = Syntax("\n".join(shown), "diff", theme="ansi_dark", background_color="default",
                  word_wrap=False)
    return Padding(code, (0, 0, 0, 4))


def _dim_block(text: str, limit: int) -> Text:
    from rich.text import Text

    lines = text.strip().splitlines()
    if len(lines) > limit:
        lines = [*lines[: limit - 1], f"… ({len(lines) - limit + 1} more lines)"]
    return Text("\n".join(lines), style="dim italic")


def summary_panel(d: dict[str, Any]) -> RenderableType:
    """The final panel: how the run ended, its summary, error and figures."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    status = d["status"]
    rows: list[RenderableType] = []
    if d.get("summary"):
        rows.append(Text(d["summary"].strip()))
    if d.get("error"):
        rows.append(Text(f"error: {d['error'].strip()}", style="red"))
    rows.append(Text(" · ".join(stats(d)), style="dim"))
    style = STATUS_STYLES.get(status, "")
    title = Text.assemble((f"{MARKS['success'] if status == 'done' else '■'} {status}",
                           f"bold {style}".strip()), (f" · task {d['task_id']}", "dim"))
    return Panel(Group(*rows), title=title, title_align="left", border_style=style or "none",
                 expand=False)
