"""Renderers: subscribers that show the event stream as JSON lines, plain lines or a live view."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from normalize.events import BaseEvent

MARKS = {"success": "✓", "error": "✗", "blocked": "⊘", "cancelled": "⊘", "interrupted": "?"}


class JsonRenderer:
    """One JSON event per line on stdout: the versioned event form."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: BaseEvent) -> None:
        self.out.write(event.to_json() + "\n")
        self.out.flush()

    def close(self) -> None:
        self.out.flush()


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
        if d.get("state"):
            return f"→ state {d['state']}"
        return f"→ step {d['index']}/{d['total']}: {d['name']}"
    if kind == "action_finished":
        mark = MARKS.get(d["status"], "·")
        line = f"  {mark} {first_line(d['command'] or d['tool'], 80)}  ({d['duration']:.2f}s)"
        detail = d.get("error") if d["status"] != "success" else None
        if detail:
            line += f"\n      {first_line(detail, 120)}"
        return line
    if kind == "action_interrupted":
        what = "runs again" if d["rerun"] else "outcome unknown"
        return f"  ? {first_line(d['command'] or d['tool'], 80)}: interrupted, {what}"
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


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary_line(d: dict[str, Any]) -> str:
    parts = [f"{d['status']}", plural(d["turns"], "turn"), plural(d["actions"], "action"),
             f"{d['duration']:.1f}s"]
    if d.get("input_tokens") or d.get("output_tokens"):
        parts.append(f"{d['input_tokens']:,} in / {d['output_tokens']:,} out tokens")
    if d.get("cost_usd"):
        parts.append(f"${d['cost_usd']:.4f}")
    line = f"task {d['task_id']} " + " · ".join(parts)
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
                self.out.write(line + "\n")
                self.out.flush()

    def close(self) -> None:
        self.out.flush()


class LiveRenderer:
    """A Rich live view: each action with a spinner that turns into ✓ / ✗ / ⊘."""

    def __init__(self, console: Any | None = None, *, refresh_per_second: float = 8.0) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console(stderr=False)
        self.live = Live(console=self.console, refresh_per_second=refresh_per_second,
                         transient=True, auto_refresh=True)
        self.running: dict[str, tuple[str, float]] = {}
        self.step = ""
        self.text = ""
        self._lock = threading.Lock()
        self._started = False

    def _render(self) -> Any:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        rows: list[Any] = []
        if self.step:
            rows.append(Text(self.step, style="bold"))
        if self.text:
            rows.append(Text(self.text[-400:], style="dim"))
        now = time.monotonic()
        for command, started in self.running.values():
            rows.append(Spinner("dots", text=Text(f"{command}  {now - started:.1f}s")))
        return Group(*rows)

    def __call__(self, event: BaseEvent) -> None:
        from rich.markup import escape

        with self._lock:
            if not self._started:
                self.live.start()
                self._started = True
            d = event.to_dict()
            kind = event.type
            if kind == "action_started":
                self.running[d["key"]] = (first_line(d["command"] or d["tool"], 80),
                                          time.monotonic())
            elif kind == "text_delta":
                self.text += d["text"]
            elif kind == "model_retried":
                self.text = ""
            elif kind == "step_started":
                self.step = describe(event) or ""
            if kind == "action_finished":
                self.running.pop(d["key"], None)
            line = describe(event)
            if kind in ("decision_made", "model_replied"):
                self.text = ""
            if line is not None and kind != "step_started":
                style = {"✓": "green", "✗": "red", "⊘": "yellow"}.get(line.strip()[:1], "")
                self.console.print(f"[{style}]{escape(line)}[/]" if style else escape(line),
                                   highlight=False)
            elif kind == "step_started" and line:
                self.console.print(f"[bold]{escape(line)}[/]", highlight=False)
            self.live.update(self._render())
            if kind == "run_ended":
                self.close()

    def close(self) -> None:
        if self._started:
            self.live.stop()
            self._started = False
