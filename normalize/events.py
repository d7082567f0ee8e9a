"""The typed event union and the one `emit` every event goes through.

Each event is a frozen dataclass with a `type` literal. `Emitter.emit` stamps
`task_id`, `seq` and `ts`, appends the event to the task's journal and fans it
out to subscribers; no other code path notifies a subscriber, so the timeline
a subscriber sees is the whole timeline.

The JSON form (`to_json`) is versioned by `EVENT_VERSION` in the `v` field.
Streaming deltas (`text_delta`, `thinking_delta`) are transient: they reach
subscribers but are not journaled; the assembled reply is in `model_replied`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Protocol, TypeVar, dataclass_transform

from normalize.fsutil import json_bytes
from normalize.redact import DeltaRedaction, Redactor, inert_already, inert_obj
from normalize.serial import Record

EVENT_VERSION = 1


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_STAMPS = frozenset({"type", "task_id"})  # the event's kind and the emitter's own id: no text
_NOT_TEXT = frozenset({int, float, bool})


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


EventClass = TypeVar("EventClass", bound=type)


@dataclass_transform(kw_only_default=True, frozen_default=True, eq_default=False)
def event(cls: EventClass) -> EventClass:
    """An event class: a frozen, keyword-only dataclass that keeps `BaseEvent`'s `==`,
    hash and repr (only `__init__` and the frozen guards are written for it)."""
    return dataclass(frozen=True, kw_only=True, eq=False, repr=False)(cls)  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class BaseEvent(Record):
    """Fields every event carries; `emit` fills in the stamps; `from_dict` reads one back."""

    type: str
    task_id: str = ""
    seq: int = 0
    ts: float = 0.0
    transient: ClassVar[bool] = False
    journaled: ClassVar[bool] = True

    # One field-driven `==`, hash and repr for every event: a dataclass writes (and
    # compiles) these per class, and the union's classes are made at every start.
    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _field_names(type(self)))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, BaseEvent)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _field_names(type(self)))
        return f"{type(self).__qualname__}({shown})"

    def to_dict(self) -> dict[str, Any]:
        """The event's fields and `v` (nested values shared, not copied: events are frozen)."""
        data = {name: getattr(self, name) for name in _field_names(type(self))}
        data["v"] = EVENT_VERSION
        return data

    def to_json(self) -> str:
        return json_bytes(self.to_dict()).decode()


@event
class RunStarted(BaseEvent):
    type: Literal["run_started"] = "run_started"
    goal: str = ""
    driver: str = ""
    workspace: str = ""
    workflow: str | None = None
    resumed: bool = False
    epoch: int = 0
    pid: int = 0
    turn: int = 0  # where the run starts, and the limits and usage so far (for progress displays)
    max_turns: int | None = None
    max_cost_usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@event
class StepStarted(BaseEvent):
    """A workflow step or a state begins; `index`/`total` drive progress displays."""

    type: Literal["step_started"] = "step_started"
    name: str = ""
    index: int = 0
    total: int = 0
    state: str | None = None


@event
class DecisionMade(BaseEvent):
    type: Literal["decision_made"] = "decision_made"
    turn: int = 0
    thinking: str = ""
    actions: list[dict[str, Any]] = field(default_factory=list)
    parallel: bool = False
    done: bool = False
    summary: str = ""


@event
class ActionStarted(BaseEvent):
    type: Literal["action_started"] = "action_started"
    turn: int = 0
    index: int = 0
    key: str = ""
    tool: str = ""
    command: str = ""
    action: dict[str, Any] = field(default_factory=dict)
    read_only: bool = True


@event
class ActionFinished(BaseEvent):
    type: Literal["action_finished"] = "action_finished"
    turn: int = 0
    index: int = 0
    key: str = ""
    tool: str = ""
    command: str = ""
    status: str = ""
    duration: float = 0.0
    exit_code: int | None = None
    error: str | None = None
    preview: str = ""
    cache_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@event
class ProcessStarted(BaseEvent):
    """An action started a child process; on resume, a survivor of a crash is stopped."""

    type: Literal["process_started"] = "process_started"
    key: str = ""
    pid: int = 0
    started: int | None = None  # the kernel's start time, to tell a reused pid apart
    owner: int = 0  # the normalize process that started it
    owner_started: int | None = None


@event
class ActionProgressed(BaseEvent):
    """A running program's output so far: its last lines and, for a test run, the counts so far
    (`passed`, `failed`, …). Shown live, redacted like any event, never journaled."""

    type: Literal["action_progressed"] = "action_progressed"
    key: str = ""
    tail: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    journaled: ClassVar[bool] = False


@event
class ChildCreated(BaseEvent):
    """An action made a sub-task; journaled (fsynced) before the child starts."""

    type: Literal["child_created"] = "child_created"
    key: str = ""
    child_id: str = ""
    goal: str = ""
    isolated: bool = False
    workspace: str = ""


@event
class ChildCollected(BaseEvent):
    """A sub-task ended and its parent's action took its outcome (and applied its diff)."""

    type: Literal["child_collected"] = "child_collected"
    key: str = ""
    child_id: str = ""
    status: str = ""
    summary: str = ""
    cost_usd: float = 0.0
    applied: bool = False
    conflicts: list[str] = field(default_factory=list)
    attempt: int = 0  # best-of-N: which attempt it was (0: not one)
    pick_exit: int | None = None  # best-of-N: its pick command's exit status
    diff_stat: str = ""
    picked: bool = False  # best-of-N: the attempt chosen


@event
class ActionInterrupted(BaseEvent):
    """On resume: an action was in flight when the last process died."""

    type: Literal["action_interrupted"] = "action_interrupted"
    key: str = ""
    tool: str = ""
    command: str = ""
    read_only: bool = True
    rerun: bool = False


@event
class TaskSaved(BaseEvent):
    """The task file was written at a quiescent point (`bytes`: its size); the JSON type
    keeps its first name. The workspace's own checkpoints are `CheckpointTaken`."""

    type: Literal["checkpoint_saved"] = "checkpoint_saved"
    turn: int = 0
    bytes: int = 0


@event
class CheckpointTaken(BaseEvent):
    """The workspace's content was recorded in the shadow store (`normalize diff`/`undo`).

    `step` numbers the task's workspace checkpoints (0: its start); `changes`
    maps each changed path to its `[added, removed]` lines (`-1` for binary
    files); `bytes` is the size of the changed files' new content; `ms` what
    recording it took (the workspace's listing, hashing and commit; for an
    action, with the snapshot taken just before it).
    """

    type: Literal["checkpoint_taken"] = "checkpoint_taken"
    step: int = 0
    turn: int = 0
    key: str = ""
    kind: str = "action"  # start, resume, action, undo, rewind
    files: int = 0
    added: int = 0
    removed: int = 0
    bytes: int = 0
    changes: dict[str, list[int]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    ms: float = 0.0


@event
class TaskRewound(BaseEvent):
    """`resume --rewind`: files and task state went back to `step`; the events with a seq
    in (`after_seq`, this event's seq) are kept in the journal but were rewound."""

    type: Literal["task_rewound"] = "task_rewound"
    step: int = 0
    turn: int = 0
    after_seq: int = 0
    files: list[str] = field(default_factory=list)


@event
class WaitingForInput(BaseEvent):
    type: Literal["waiting_for_input"] = "waiting_for_input"
    kind: str = "question"
    question: str = ""
    command: str | None = None


@event
class InputReceived(BaseEvent):
    type: Literal["input_received"] = "input_received"
    kind: str = "question"
    answer: str = ""


@event
class ModelRequested(BaseEvent):
    type: Literal["model_requested"] = "model_requested"
    turn: int = 0
    model: str = ""
    attempt: int = 1
    input_chars: int = 0


@event
class TextDelta(BaseEvent):
    type: Literal["text_delta"] = "text_delta"
    text: str = ""
    transient: ClassVar[bool] = True


@event
class ThinkingDelta(BaseEvent):
    type: Literal["thinking_delta"] = "thinking_delta"
    text: str = ""
    transient: ClassVar[bool] = True


@event
class ModelReplied(BaseEvent):
    type: Literal["model_replied"] = "model_replied"
    turn: int = 0
    model: str = ""
    text: str = ""
    thinking: str = ""
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


@event
class ModelRetried(BaseEvent):
    """A model turn failed and will be made again; streamed text so far is void."""

    type: Literal["model_retried"] = "model_retried"
    attempt: int = 0
    delay: float = 0.0
    reason: str = ""


@event
class FallbackUsed(BaseEvent):
    type: Literal["fallback_used"] = "fallback_used"
    from_model: str = ""
    to_model: str = ""
    reason: str = ""


@event
class LoopDetected(BaseEvent):
    type: Literal["loop_detected"] = "loop_detected"
    command: str = ""
    repeats: int = 0


@event
class ContextCompacted(BaseEvent):
    type: Literal["context_compacted"] = "context_compacted"
    before_chars: int = 0
    after_chars: int = 0
    results_compacted: int = 0


@event
class Notice(BaseEvent):
    """Something a watcher should know: a correction, a warning, a note."""

    type: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    message: str = ""


@event
class HookRan(BaseEvent):
    """A hook of the person's ran: on which event, how it ended, and what it said."""

    type: Literal["hook_ran"] = "hook_ran"
    event: str = ""
    command: str = ""
    exit_code: int | None = None
    duration: float = 0.0
    outcome: Literal["ok", "blocked", "failed", "timed_out"] = "ok"
    reason: str | None = None  # a block's reason, or why the hook failed


@event
class HarnessSession(BaseEvent):
    """A harness (another agent run as a driver) named the session its turns continue."""

    type: Literal["harness_session"] = "harness_session"
    harness: str = ""
    session_id: str = ""


@event
class HarnessToolCalled(BaseEvent):
    """A harness ran one of its own tools (information: the harness executed it)."""

    type: Literal["harness_tool_called"] = "harness_tool_called"
    harness: str = ""
    call_id: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)


@event
class HarnessToolFinished(BaseEvent):
    """What one of a harness's own tool calls gave back."""

    type: Literal["harness_tool_finished"] = "harness_tool_finished"
    harness: str = ""
    call_id: str = ""
    ok: bool = True
    output: str = ""


@event
class HarnessEvent(BaseEvent):
    """An event of a harness's stream normalize has no type for, kept as it came."""

    type: Literal["harness_event"] = "harness_event"
    harness: str = ""
    kind: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@event
class MemoryProposed(BaseEvent):
    """What a task that succeeded proposed to remember (said at its end: never silent).

    Each entry: `id`, `text`, `state` (`inbox`, or `accepted` under `memory = "auto"`),
    `source` (`observed`, `person`, `model`), `why`; `dropped`: candidates left out, and why.
    """

    type: Literal["memory_proposed"] = "memory_proposed"
    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@event
class RunEnded(BaseEvent):
    type: Literal["run_ended"] = "run_ended"
    status: str = ""
    exit_code: int = 0
    summary: str = ""
    error: str | None = None
    turns: int = 0
    actions: int = 0
    duration: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    result: Any = None  # the validated structured result (`--output-schema`), else None


@event
class BatchStarted(BaseEvent):
    """A batch's parent began its first run (`task_id` is the batch's id)."""

    type: Literal["batch_started"] = "batch_started"
    batch: str = ""
    items: int = 0
    executor: str = ""


@event
class BatchResumed(BaseEvent):
    """A batch's parent runs again (`resume BATCH`): what ended is collected, the rest run."""

    type: Literal["batch_resumed"] = "batch_resumed"
    batch: str = ""
    items: int = 0


@event
class ItemUpdated(BaseEvent):
    """One item of a batch was submitted (`running`) or ended (its task's status)."""

    type: Literal["item_updated"] = "item_updated"
    position: int = 0
    item_task_id: str = ""  # the item's own task (`task_id` is the batch's)
    status: str = ""  # the item task's status, or `untouched` / `failed` without a task
    attempts: int = 0
    cost_usd: float = 0.0
    note: str = ""
    item: dict[str, Any] = field(default_factory=dict)  # the item's fields, as read


@event
class BatchEnded(BaseEvent):
    """A batch's run ended: how many items ended how, and what it cost."""

    type: Literal["batch_ended"] = "batch_ended"
    batch: str = ""
    status: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    untouched: list[int] = field(default_factory=list)  # positions never submitted
    why: str = ""  # why they were left untouched (the budget, or the item that stopped it)


_ENVELOPE = ("type", "task_id", "seq", "ts", "v")


@event
class UnknownEvent(BaseEvent):
    """A journaled event of a type this version does not know (a newer one's): kept whole.

    `data` holds its other fields as written; `to_dict` gives the line back
    as it was, so reading and writing a journal never loses it.
    """

    data: dict[str, Any] = field(default_factory=dict)
    version: int = EVENT_VERSION  # its `v`

    def to_dict(self) -> dict[str, Any]:
        return {**self.data, "type": self.type, "task_id": self.task_id, "seq": self.seq,
                "ts": self.ts, "v": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnknownEvent:
        seq, ts, version = data.get("seq", 0), data.get("ts", 0.0), data.get("v", EVENT_VERSION)
        return cls(type=str(data.get("type", "")), task_id=str(data.get("task_id", "")),
                   seq=seq if _is_int(seq) else 0,
                   ts=float(ts) if isinstance(ts, int | float) else 0.0,
                   version=version if _is_int(version) else EVENT_VERSION,
                   data={k: v for k, v in data.items() if k not in _ENVELOPE})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


Event = (
    RunStarted | StepStarted | DecisionMade | ActionStarted | ActionFinished | ProcessStarted
    | ActionProgressed | ChildCreated | ChildCollected | ActionInterrupted
    | CheckpointTaken | TaskRewound
    | TaskSaved | WaitingForInput | InputReceived | ModelRequested | TextDelta
    | ThinkingDelta | ModelReplied | ModelRetried | FallbackUsed | LoopDetected
    | ContextCompacted | Notice | HookRan | RunEnded | UnknownEvent | MemoryProposed
    | HarnessSession | HarnessToolCalled | HarnessToolFinished | HarnessEvent
    | BatchStarted | BatchResumed | ItemUpdated | BatchEnded
)
"""Every event: a `match` over it that misses a case fails type-checking (`assert_never`)."""

EVENT_TYPES: dict[str, type[BaseEvent]] = {
    cls.__dataclass_fields__["type"].default: cls
    for cls in (
        RunStarted, StepStarted, DecisionMade, ActionStarted, ActionFinished, ProcessStarted,
        ActionProgressed, ChildCreated, ChildCollected, ActionInterrupted,
        CheckpointTaken, TaskRewound,
        TaskSaved, WaitingForInput, InputReceived, ModelRequested, TextDelta,
        ThinkingDelta, ModelReplied, ModelRetried, FallbackUsed, LoopDetected,
        ContextCompacted, Notice, HookRan, RunEnded, MemoryProposed,
        HarnessSession, HarnessToolCalled, HarnessToolFinished, HarnessEvent,
        BatchStarted, BatchResumed, ItemUpdated, BatchEnded,
    )
}


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from its JSON form; unknown fields are dropped (newer writers).

    A type this version does not know is an `UnknownEvent` holding the data;
    a value of the wrong shape is a TypeError (a line without a `type` too).
    """
    kind = data.get("type")
    if not isinstance(kind, str):
        raise TypeError(f"an event needs a `type`, not {kind!r}")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        return UnknownEvent.from_dict(data)
    try:
        return cls.from_dict(data)  # type: ignore[return-value]  # every class is in `Event`
    except (KeyError, ValueError) as exc:
        raise TypeError(f"{kind}: {exc}") from None


def decode_events(raw: Iterable[Mapping[str, Any]]) -> Iterator[Event]:
    """A journal's lines as events (unknown types kept as `UnknownEvent`; broken lines skipped)."""
    for data in raw:
        try:
            yield event_from_dict(data)
        except TypeError:
            continue


class Journal(Protocol):
    """Where emitted events are appended."""

    offset: int
    """How many bytes the journal holds so far (a checkpoint records it)."""

    def append(self, event: BaseEvent, *, durable: bool = False) -> None: ...

    def close(self) -> None: ...


Subscriber = Callable[[Event], None]
"""What watches a run: it is handed every event, and dispatches on the union (`match`)."""


class Emit(Protocol):
    """The signature of `Emitter.emit`, handed to drivers."""

    def __call__(self, event: Event, *, durable: bool = False) -> Event: ...


E = TypeVar("E", bound=BaseEvent)


def _stamp(event: E, **stamps: Any) -> E:
    """A copy of a frozen event with its stamps set (what `dataclasses.replace` does, minus
    re-running `__init__`: this runs for every event)."""
    copy = object.__new__(type(event))
    copy.__dict__.update(event.__dict__, **stamps)
    return copy


class Emitter:
    """The one emit: stamps, redacts, journals, fans out. Thread-safe.

    Streamed deltas are not journaled (the assembled reply is). When `redact`
    is a `normalize.redact.Redactor`, deltas are redacted
    too: each stream holds back a short tail, so a secret split across deltas
    is caught, and the tail is let out before the next other event.

    A subscriber that raises is detached, and a warning `Notice` naming it and
    its error is emitted after the event (journaled, and shown to the others):
    one broken watcher never stops the run or the other watchers.
    """

    def __init__(self, task_id: str, *, seq: int = 0, journal: Journal | None = None,
                 redact: Callable[[Any], Any] | None = None) -> None:
        self.task_id = task_id
        self.seq = seq
        self.journal = journal
        self.redact = redact
        self._deltas: DeltaRedaction | None = \
            redact.stream() if isinstance(redact, Redactor) else None
        self._subscribers: list[Subscriber] = []
        self._lock = threading.RLock()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._detach(subscriber)

    def emit(self, event: Event, *, durable: bool = False) -> Event:
        """Stamp, journal (fsynced when `durable`) and fan out `event`, in seq order."""
        with self._lock:
            deltas = self._deltas
            if deltas is not None:
                if event.transient:
                    shown = deltas.feed(event.type, getattr(event, "text", ""))
                    if not shown:
                        return event  # held back: let out with the next piece or event
                    event = _stamp(event, text=shown)
                elif deltas.pending:  # let the held tails out first, the usual way
                    self._deltas = None
                    try:
                        for kind, text in deltas.flush():
                            self.emit(TextDelta(text=text) if kind == "text_delta"
                                      else ThinkingDelta(text=text))
                    finally:
                        self._deltas = deltas
            self.seq += 1
            stamped = _stamp(event, task_id=self.task_id, seq=self.seq, ts=time.time())
            # once, before any reader (the journal, `--json` on stdout, the live view):
            # secrets redacted, control characters made visible and inert
            stamped = self.shown(stamped)
            if self.journal is not None and not stamped.transient and stamped.journaled:
                self.journal.append(stamped, durable=durable)
            failed = self._fan_out(stamped)
            for subscriber, exc in failed:  # after the event, so every watcher keeps seq order
                self.emit(Notice(level="warning", message=(
                    f"subscriber {_name(subscriber)} was detached: it raised "
                    f"{type(exc).__name__}: {exc}")))
        return stamped

    def shown(self, event: Event) -> Event:
        """`event` with its text redacted and inert: itself when that changes nothing.

        With a `Redactor`, only the fields that hold text are looked at, and
        nothing is copied unless something in them changes.
        """
        plain = event.to_dict()
        redact = None if event.transient else self.redact
        if redact is None or isinstance(redact, Redactor):
            values = {name: value for name, value in plain.items()
                      if name not in _STAMPS and value is not None
                      and type(value) not in _NOT_TEXT}
            if redact.unchanged(values) if redact is not None else inert_already(values):
                return event  # most events: one scan of their joined text
            changed = {}
            for name, value in values.items():
                shown = redact.shown_field(name, value) if redact is not None else \
                    inert_obj(value)
                if shown is not value and shown != value:
                    changed[name] = shown
            return event_from_dict({**plain, **changed}) if changed else event
        shown = inert_obj(redact(plain))
        return event if shown == plain else event_from_dict(shown)

    def _fan_out(self, event: Event) -> list[tuple[Subscriber, Exception]]:
        """Give `event` to each subscriber; detach and return the ones that raised."""
        failed: list[tuple[Subscriber, Exception]] = []
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception as exc:  # isolated: a watcher's failure is not the run's
                self._detach(subscriber)
                failed.append((subscriber, exc))
        return failed

    def _detach(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)


def _name(subscriber: Subscriber) -> str:
    """A subscriber as a person reads it: its function's or its class's name."""
    name = getattr(subscriber, "__qualname__", None)
    return str(name) if name else type(subscriber).__qualname__
