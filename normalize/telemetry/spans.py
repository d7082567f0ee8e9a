"""`Tracing`: a run's events as OpenTelemetry spans (loaded only when tracing is on).

The tree follows the events: `run` (one run of a task, from `run_started` to
`run_ended`) holds a `turn N` per turn (N counted from 1, as the live view
does), which holds a `chat MODEL` span per model request (tokens in and out,
cache reads and writes, cost, model; a request that is retried ends in error)
and an `execute_tool VERB` span per action (verb, target, command, status,
duration). Hooks, questions, notices and the like are span events. Every span
carries `normalize.task_id`; names follow the GenAI semantic conventions where
they fit. Text is redacted again (the emitter did it once) and cut to
`TEXT_LIMIT`. Times are the events' own stamps.

A run started with `TRACEPARENT` (W3C) in its environment is that span's
child; `child_env` gives a sub-task the context of the action that spawned it
the same way, so a child process's run sits under its parent's `spawn`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    ActionStarted,
    BaseEvent,
    ChildCollected,
    ChildCreated,
    ContextCompacted,
    DecisionMade,
    FallbackUsed,
    HookRan,
    LoopDetected,
    ModelReplied,
    ModelRequested,
    ModelRetried,
    Notice,
    RunEnded,
    RunStarted,
    WaitingForInput,
)
from normalize.redact import redact as redact_text
from normalize.telemetry.otlp import EXPORT_TIMEOUT, Watch

__all__ = ["TEXT_LIMIT", "Tracing"]

TEXT_LIMIT = 1000  # characters of a text attribute
FLUSH_MS = int(EXPORT_TIMEOUT * 1000) + 500  # how long a run's end waits for its spans to leave
STAMPS = frozenset({"type", "task_id", "seq", "ts"})
MARKED = (HookRan, WaitingForInput, FallbackUsed, LoopDetected, ContextCompacted,
          ActionInterrupted, ChildCollected, Notice)
_PROPAGATOR = TraceContextTextMapPropagator()

Attrs = dict[str, str | bool | int | float | list[str]]


def _ns(ts: float) -> int:
    return int(ts * 1_000_000_000)


class Tracing:
    """An event subscriber that turns a run's events into spans (see the module docstring)."""

    def __init__(self, provider: TracerProvider, *, parent: str | None = None,
                 redact: Callable[[str], str] | None = None, watch: Watch | None = None) -> None:
        self.provider = provider
        self.watch = watch
        self._tracer = provider.get_tracer("normalize")
        self._parent: Context | None = _PROPAGATOR.extract({"traceparent": parent}) \
            if parent else None
        self._outer = {"TRACEPARENT": parent} if parent else {}
        self._redact = redact or redact_text
        self._lock = threading.RLock()
        self._task_id = ""
        self._run: Span | None = None
        self._turn: Span | None = None
        self._turn_no = -1
        self._request: Span | None = None
        self._actions: dict[str, Span] = {}
        self._children: dict[str, dict[str, str]] = {}

    def __call__(self, event: BaseEvent) -> None:
        with self._lock:
            self._on(event)

    def _on(self, event: BaseEvent) -> None:
        match event:
            case RunStarted():
                self._run_started(event)
            case ModelRequested():
                self._request_started(event)
            case ModelReplied():
                self._request_ended(event)
            case ModelRetried():
                self._request_failed(event)
            case DecisionMade():
                self._at_turn(event.turn, event.ts)
            case ActionStarted():
                self._action_started(event)
            case ActionFinished():
                self._action_finished(event)
            case ChildCreated():
                self._child_created(event)
            case RunEnded():
                self._run_ended(event)
            case _ if isinstance(event, MARKED):
                self._mark(event)

    # -- the run and its turns ---------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        self._close_open(event.ts)  # a run that never said it ended (its process died)
        self._task_id = event.task_id
        self._run = self._tracer.start_span("run", context=self._parent, start_time=_ns(event.ts),
                                            attributes=self._attrs({
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "normalize",
            "normalize.goal": self._text(event.goal), "normalize.driver": event.driver,
            "normalize.workflow": event.workflow or "", "normalize.resumed": event.resumed,
            "normalize.workspace": event.workspace}))
        self._turn, self._turn_no = None, -1

    def _at_turn(self, turn: int, ts: float) -> Span | None:
        """The span of turn `turn`, started (and the last one ended) when it is new."""
        if self._run is None:
            return None
        if turn != self._turn_no or self._turn is None:
            self._end(self._turn, ts)
            self._turn_no = turn
            self._turn = self._start(f"turn {turn + 1}", self._run, ts,
                                     {"normalize.turn": turn + 1})
        return self._turn

    def _run_ended(self, event: RunEnded) -> None:
        run = self._run
        self._close_open(event.ts, keep_run=True)
        if run is None:
            return
        run.set_attributes(self._attrs({
            "normalize.status": event.status, "normalize.exit_code": event.exit_code,
            "normalize.turns": event.turns, "normalize.actions": event.actions,
            "normalize.summary": self._text(event.summary),
            "gen_ai.usage.input_tokens": event.input_tokens,
            "gen_ai.usage.output_tokens": event.output_tokens,
            "normalize.cost_usd": event.cost_usd}))
        if event.status == "failed" or event.error:
            run.set_status(Status(StatusCode.ERROR, self._text(event.error or event.status)))
        run.end(_ns(event.ts))
        self._run = None
        self.flush()

    def _close_open(self, ts: float, *, keep_run: bool = False) -> None:
        """End every span still open (the run ended first: they did not finish)."""
        for span in self._actions.values():
            span.set_status(Status(StatusCode.ERROR, "the run ended before the action did"))
            span.end(_ns(ts))
        self._actions.clear()
        if self._request is not None:
            self._request.set_status(Status(StatusCode.ERROR, "the run ended before the reply"))
        self._end(self._request, ts)
        self._end(self._turn, ts)
        self._request = self._turn = None
        if not keep_run:
            self._end(self._run, ts)
            self._run = None

    # -- model requests ----------------------------------------------------------------------

    def _request_started(self, event: ModelRequested) -> None:
        turn = self._at_turn(event.turn, event.ts)
        if turn is None:
            return
        self._end(self._request, event.ts)
        self._request = self._start(f"chat {event.model}", turn, event.ts, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": event.model,
            "normalize.attempt": event.attempt, "normalize.input_chars": event.input_chars})

    def _request_ended(self, event: ModelReplied) -> None:
        span = self._request or self._request_for(event)
        if span is None:
            return
        attrs: Attrs = {
            "gen_ai.response.model": event.model,
            "gen_ai.usage.input_tokens": event.input_tokens,
            "gen_ai.usage.output_tokens": event.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": event.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": event.cache_write_tokens,
            "normalize.cost_usd": event.cost_usd}
        if event.stop_reason:
            attrs["gen_ai.response.finish_reasons"] = [event.stop_reason]
        span.set_attributes(attrs)
        span.end(_ns(event.ts))
        self._request = None

    def _request_for(self, event: ModelReplied) -> Span | None:
        """A reply with no request seen (a driver that only reports replies): its own span."""
        turn = self._at_turn(event.turn, event.ts)
        return None if turn is None else self._start(
            f"chat {event.model}", turn, event.ts, {"gen_ai.operation.name": "chat"})

    def _request_failed(self, event: ModelRetried) -> None:
        if self._request is None:
            return
        self._request.set_attributes({"normalize.retry_delay_s": event.delay})
        self._request.set_status(Status(StatusCode.ERROR, self._text(event.reason)))
        self._request.end(_ns(event.ts))
        self._request = None

    # -- actions and the sub-tasks they start ------------------------------------------------

    def _action_started(self, event: ActionStarted) -> None:
        turn = self._at_turn(event.turn, event.ts)
        if turn is None:
            return
        self._actions[event.key] = self._start(f"execute_tool {event.tool}", turn, event.ts, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool,
            "normalize.action.verb": event.tool, "normalize.action.key": event.key,
            "normalize.action.command": self._text(event.command),
            "normalize.action.target": self._text(_target(event.action)),
            "normalize.action.read_only": event.read_only})

    def _action_finished(self, event: ActionFinished) -> None:
        span = self._actions.pop(event.key, None)
        if span is None:
            return
        attrs: Attrs = {"normalize.action.status": event.status,
                        "normalize.action.duration_s": event.duration}
        if event.exit_code is not None:
            attrs["normalize.action.exit_code"] = event.exit_code
        if event.error:
            attrs["normalize.action.error"] = self._text(event.error)
        span.set_attributes(attrs)
        if event.status == "error":
            span.set_status(Status(StatusCode.ERROR, self._text(event.error or "error")))
        span.end(_ns(event.ts))

    def _child_created(self, event: ChildCreated) -> None:
        span = self._actions.get(event.key) or self._turn or self._run
        if span is None:
            return
        span.add_event("child_created", {"normalize.child_id": event.child_id},
                       timestamp=_ns(event.ts))
        self._children[event.child_id] = _carrier(span)

    def child_env(self, child_id: str) -> dict[str, str]:
        """The environment that makes a sub-task's run a child of the action that spawned it
        (of the run, when no action said so; of this process's own parent, outside a run)."""
        with self._lock:
            found = self._children.get(child_id)
            if found is None and self._run is not None:
                found = _carrier(self._run)
            return dict(found or self._outer)

    # -- the rest: marks on the span that is open ---------------------------------------------

    def _mark(self, event: BaseEvent) -> None:
        span = self._turn or self._run
        if span is None:
            return
        attrs: Attrs = {}
        for name, value in event.to_dict().items():
            if name in STAMPS or name == "v" or value is None:
                continue
            if isinstance(value, str):
                attrs[f"normalize.{name}"] = self._text(value)
            elif isinstance(value, bool | int | float):
                attrs[f"normalize.{name}"] = value
        span.add_event(event.type, attrs, timestamp=_ns(event.ts))

    def flush(self) -> bool:
        """Send the spans ended so far, waiting a bounded time; whether they all left."""
        return self.provider.force_flush(FLUSH_MS)

    def close(self) -> None:
        """End what is still open (in error: the process ended first), flush, stop exporting."""
        with self._lock:
            if self._run is not None:
                self._run.set_status(Status(StatusCode.ERROR, "the process ended before the run"))
            self._close_open(time.time())
        self.provider.shutdown()

    def problem(self) -> str | None:
        """Why spans did not reach the collector, the first time it is asked after they did not."""
        return None if self.watch is None else self.watch.problem()

    # -- helpers -------------------------------------------------------------------------------

    def _start(self, name: str, parent: Span, ts: float, attrs: Attrs) -> Span:
        return self._tracer.start_span(name, context=trace.set_span_in_context(parent),
                                       start_time=_ns(ts), attributes=self._attrs(attrs))

    def _attrs(self, attrs: Attrs) -> Attrs:
        return {"normalize.task_id": self._task_id, **attrs}

    def _text(self, text: str) -> str:
        return self._redact(text)[:TEXT_LIMIT]

    @staticmethod
    def _end(span: Span | None, ts: float) -> None:
        if span is not None:
            span.end(_ns(ts))


def _carrier(span: Span) -> dict[str, str]:
    """`span`'s context as W3C `TRACEPARENT` (and `TRACESTATE`) environment variables."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return {name.upper(): value for name, value in carrier.items()}


def _target(action: Mapping[str, Any]) -> str:
    """What an action works on: its first argument (a path, a pattern), or ''."""
    params = action.get("params")
    args = params.get("args") if isinstance(params, Mapping) else None
    first = args[0] if isinstance(args, list) and args else ""
    return first if isinstance(first, str) else ""
