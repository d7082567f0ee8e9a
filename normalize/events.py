"""The typed event union and the one `emit` every event goes through.

Each event is a frozen, keyword-only `msgspec.Struct` tagged by its `type`
(the union is decoded in one call, by the tag). `Emitter.emit` stamps
`task_id`, `seq` and `ts`, redacts, appends the event to the task's journal and
fans it out to subscribers; no other code path notifies a subscriber, so the
timeline a subscriber sees is the whole timeline.

The JSON form (`encoded`, `to_json`) is versioned by `EVENT_VERSION` in the `v`
field; an event is encoded once, and the journal and `--json` share the bytes.
Streaming deltas (`text_delta`, `thinking_delta`) are transient: they reach
subscribers but are not journaled; the assembled reply is in `model_replied`.
"""

# No `from __future__ import annotations`: the fields' types are objects when the classes
# are made, so msgspec need not evaluate 35 classes' annotations from strings the first time
# a journal is decoded (0.7 ms for the union's decoder, not 3-6 ms).
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Literal, Protocol, Self, TypeVar, Union

import msgspec
from msgspec import field

from normalize.fsutil import json_bytes
from normalize.redact import DeltaRedaction, Redactor, inert_already, inert_obj

EVENT_VERSION = 1

_STAMPS = frozenset({"type", "task_id"})  # the event's kind and the emitter's own id: no text
_NOT_TEXT = frozenset({int, float, bool})
_VERSION_TAIL = b',"v":%d}' % EVENT_VERSION


class BaseEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Fields every event carries; `emit` fills in the stamps; `from_dict` reads one back.

    `==`, hash and repr compare and show every field (msgspec's, written once in C,
    not per class). The stamps come after the event's own fields in its JSON.
    """

    task_id: str = ""
    seq: int = 0
    ts: float = 0.0
    transient: ClassVar[bool] = False
    journaled: ClassVar[bool] = True

    @property
    def type(self) -> str:
        """The event's kind: its tag in the union, its `type` in JSON."""
        return str(self.__struct_config__.tag)

    def to_dict(self) -> dict[str, Any]:
        """The event's fields, `type` and `v` (nested values shared, not copied: events are
        frozen)."""
        data: dict[str, Any] = {"type": self.type}
        for name in self.__struct_fields__:
            data[name] = getattr(self, name)
        data["v"] = EVENT_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """An event of this class from its JSON form (unknown keys dropped); a value of the
        wrong shape is a TypeError."""
        try:
            return msgspec.convert(data, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise TypeError(f"{data.get('type')}: {exc}") from None

    def to_bytes(self) -> bytes:
        """The event as its JSON line (no newline), encoded once: the journal and `--json`
        share it. The last event encoded is remembered by identity (events are frozen): the
        emitter's journal write encodes it, the `--json` printer finds it done."""
        last, raw = _LAST[0]
        if last is self:
            return raw
        try:  # the union's bytes, with the version after the stamps
            raw = _ENCODER.encode(self)[:-1] + _VERSION_TAIL
        except UnicodeEncodeError:  # a lone surrogate (a file name): written with ASCII escapes
            raw = json_bytes(self.to_dict())
        _LAST[0] = (self, raw)
        return raw

    def to_json(self) -> str:
        return self.to_bytes().decode()


class RunStarted(BaseEvent, frozen=True, kw_only=True, tag="run_started"):
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


class StepStarted(BaseEvent, frozen=True, kw_only=True, tag="step_started"):
    """A workflow step or a state begins; `index`/`total` drive progress displays."""

    name: str = ""
    index: int = 0
    total: int = 0
    state: str | None = None


class DecisionMade(BaseEvent, frozen=True, kw_only=True, tag="decision_made"):
    turn: int = 0
    thinking: str = ""
    actions: list[dict[str, Any]] = field(default_factory=list)
    parallel: bool = False
    done: bool = False
    summary: str = ""


class ActionStarted(BaseEvent, frozen=True, kw_only=True, tag="action_started"):
    turn: int = 0
    index: int = 0
    key: str = ""
    tool: str = ""
    command: str = ""
    action: dict[str, Any] = field(default_factory=dict)
    read_only: bool = True


class ActionFinished(BaseEvent, frozen=True, kw_only=True, tag="action_finished"):
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


class ProcessStarted(BaseEvent, frozen=True, kw_only=True, tag="process_started"):
    """An action started a child process; on resume, a survivor of a crash is stopped."""

    key: str = ""
    pid: int = 0
    started: int | None = None  # the kernel's start time, to tell a reused pid apart
    owner: int = 0  # the normalize process that started it
    owner_started: int | None = None


class ActionProgressed(BaseEvent, frozen=True, kw_only=True, tag="action_progressed"):
    """A running program's output so far: its last lines and, for a test run, the counts so far
    (`passed`, `failed`, …). Shown live, redacted like any event, never journaled."""

    key: str = ""
    tail: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    journaled: ClassVar[bool] = False


class ChildCreated(BaseEvent, frozen=True, kw_only=True, tag="child_created"):
    """An action made a sub-task; journaled (fsynced) before the child starts."""

    key: str = ""
    child_id: str = ""
    goal: str = ""
    isolated: bool = False
    workspace: str = ""


class ChildCollected(BaseEvent, frozen=True, kw_only=True, tag="child_collected"):
    """A sub-task ended and its parent's action took its outcome (and applied its diff)."""

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


class ActionInterrupted(BaseEvent, frozen=True, kw_only=True, tag="action_interrupted"):
    """On resume: an action was in flight when the last process died."""

    key: str = ""
    tool: str = ""
    command: str = ""
    read_only: bool = True
    rerun: bool = False


class TaskSaved(BaseEvent, frozen=True, kw_only=True, tag="checkpoint_saved"):
    """The task file was written at a quiescent point (`bytes`: its size); the JSON type
    keeps its first name. The workspace's own checkpoints are `CheckpointTaken`."""

    turn: int = 0
    bytes: int = 0


class CheckpointTaken(BaseEvent, frozen=True, kw_only=True, tag="checkpoint_taken"):
    """The workspace's content was recorded in the shadow store (`normalize diff`/`undo`).

    `step` numbers the task's workspace checkpoints (0: its start); `changes`
    maps each changed path to its `[added, removed]` lines (`-1` for binary
    files); `bytes` is the size of the changed files' new content; `ms` what
    recording it took (the workspace's listing, hashing and commit; for an
    action, with the snapshot taken just before it).
    """

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


class TaskRewound(BaseEvent, frozen=True, kw_only=True, tag="task_rewound"):
    """`resume --rewind`: files and task state went back to `step`; the events with a seq
    in (`after_seq`, this event's seq) are kept in the journal but were rewound."""

    step: int = 0
    turn: int = 0
    after_seq: int = 0
    files: list[str] = field(default_factory=list)


class WaitingForInput(BaseEvent, frozen=True, kw_only=True, tag="waiting_for_input"):
    kind: str = "question"
    question: str = ""
    command: str | None = None


class InputReceived(BaseEvent, frozen=True, kw_only=True, tag="input_received"):
    kind: str = "question"
    answer: str = ""


class ModelRequested(BaseEvent, frozen=True, kw_only=True, tag="model_requested"):
    turn: int = 0
    model: str = ""
    attempt: int = 1
    input_chars: int = 0


class TextDelta(BaseEvent, frozen=True, kw_only=True, tag="text_delta"):
    text: str = ""
    transient: ClassVar[bool] = True


class ThinkingDelta(BaseEvent, frozen=True, kw_only=True, tag="thinking_delta"):
    text: str = ""
    transient: ClassVar[bool] = True


class ModelReplied(BaseEvent, frozen=True, kw_only=True, tag="model_replied"):
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


class ModelRetried(BaseEvent, frozen=True, kw_only=True, tag="model_retried"):
    """A model turn failed and will be made again; streamed text so far is void."""

    attempt: int = 0
    delay: float = 0.0
    reason: str = ""


class FallbackUsed(BaseEvent, frozen=True, kw_only=True, tag="fallback_used"):
    from_model: str = ""
    to_model: str = ""
    reason: str = ""


class LoopDetected(BaseEvent, frozen=True, kw_only=True, tag="loop_detected"):
    command: str = ""
    repeats: int = 0


class ContextCompacted(BaseEvent, frozen=True, kw_only=True, tag="context_compacted"):
    before_chars: int = 0
    after_chars: int = 0
    results_compacted: int = 0


class Notice(BaseEvent, frozen=True, kw_only=True, tag="notice"):
    """Something a watcher should know: a correction, a warning, a note."""

    level: Literal["info", "warning", "error"] = "info"
    message: str = ""


class HookRan(BaseEvent, frozen=True, kw_only=True, tag="hook_ran"):
    """A hook of the person's ran: on which event, how it ended, and what it said."""

    event: str = ""
    command: str = ""
    exit_code: int | None = None
    duration: float = 0.0
    outcome: Literal["ok", "blocked", "failed", "timed_out"] = "ok"
    reason: str | None = None  # a block's reason, or why the hook failed


class HarnessSession(BaseEvent, frozen=True, kw_only=True, tag="harness_session"):
    """A harness (another agent run as a driver) named the session its turns continue."""

    harness: str = ""
    session_id: str = ""


class HarnessToolCalled(BaseEvent, frozen=True, kw_only=True, tag="harness_tool_called"):
    """A harness ran one of its own tools (information: the harness executed it)."""

    harness: str = ""
    call_id: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)


class HarnessToolFinished(BaseEvent, frozen=True, kw_only=True, tag="harness_tool_finished"):
    """What one of a harness's own tool calls gave back."""

    harness: str = ""
    call_id: str = ""
    ok: bool = True
    output: str = ""


class HarnessEvent(BaseEvent, frozen=True, kw_only=True, tag="harness_event"):
    """An event of a harness's stream normalize has no type for, kept as it came."""

    harness: str = ""
    kind: str = ""
    data: dict[str, Any] = field(default_factory=dict)


class MemoryProposed(BaseEvent, frozen=True, kw_only=True, tag="memory_proposed"):
    """What a task that succeeded proposed to remember (said at its end: never silent).

    Each entry: `id`, `text`, `state` (`inbox`, or `accepted` under `memory = "auto"`),
    `source` (`observed`, `person`, `model`), `why`; `dropped`: candidates left out, and why.
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class RunEnded(BaseEvent, frozen=True, kw_only=True, tag="run_ended"):
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


class BatchStarted(BaseEvent, frozen=True, kw_only=True, tag="batch_started"):
    """A batch's parent began its first run (`task_id` is the batch's id)."""

    batch: str = ""
    items: int = 0
    executor: str = ""


class BatchResumed(BaseEvent, frozen=True, kw_only=True, tag="batch_resumed"):
    """A batch's parent runs again (`resume BATCH`): what ended is collected, the rest run."""

    batch: str = ""
    items: int = 0


class ItemUpdated(BaseEvent, frozen=True, kw_only=True, tag="item_updated"):
    """One item of a batch was submitted (`running`) or ended (its task's status)."""

    position: int = 0
    item_task_id: str = ""  # the item's own task (`task_id` is the batch's)
    status: str = ""  # the item task's status, or `untouched` / `failed` without a task
    attempts: int = 0
    cost_usd: float = 0.0
    note: str = ""
    item: dict[str, Any] = field(default_factory=dict)  # the item's fields, as read


class BatchEnded(BaseEvent, frozen=True, kw_only=True, tag="batch_ended"):
    """A batch's run ended: how many items ended how, and what it cost."""

    batch: str = ""
    status: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    untouched: list[int] = field(default_factory=list)  # positions never submitted
    why: str = ""  # why they were left untouched (the budget, or the item that stopped it)


_ENVELOPE = ("type", "task_id", "seq", "ts", "v")


class UnknownEvent(BaseEvent, frozen=True, kw_only=True, tag="unknown"):
    """A journaled event of a type this version does not know (a newer one's): kept whole.

    `kind` is its `type` as written, `data` its other fields; `to_dict` gives the
    line back as it was, so reading and writing a journal never loses it.
    """

    kind: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    version: int = EVENT_VERSION  # its `v`

    @property
    def type(self) -> str:
        return self.kind

    def to_dict(self) -> dict[str, Any]:
        return {**self.data, "type": self.kind, "task_id": self.task_id, "seq": self.seq,
                "ts": self.ts, "v": self.version}

    def to_bytes(self) -> bytes:
        return json_bytes(self.to_dict())  # its fields as they came, not the union's

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UnknownEvent":
        seq, ts, version = data.get("seq", 0), data.get("ts", 0.0), data.get("v", EVENT_VERSION)
        return cls(kind=str(data.get("type", "")), task_id=str(data.get("task_id", "")),
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

_KNOWN: tuple[type[BaseEvent], ...] = (
    RunStarted, StepStarted, DecisionMade, ActionStarted, ActionFinished, ProcessStarted,
    ActionProgressed, ChildCreated, ChildCollected, ActionInterrupted,
    CheckpointTaken, TaskRewound,
    TaskSaved, WaitingForInput, InputReceived, ModelRequested, TextDelta,
    ThinkingDelta, ModelReplied, ModelRetried, FallbackUsed, LoopDetected,
    ContextCompacted, Notice, HookRan, RunEnded, MemoryProposed,
    HarnessSession, HarnessToolCalled, HarnessToolFinished, HarnessEvent,
    BatchStarted, BatchResumed, ItemUpdated, BatchEnded,
)
EVENT_TYPES: dict[str, type[BaseEvent]] = {str(cls.__struct_config__.tag): cls for cls in _KNOWN}

_ENCODER = msgspec.json.Encoder()
_LAST: list[tuple[BaseEvent | None, bytes]] = [(None, b"")]  # the last event encoded, and how
_DECODER: list[msgspec.json.Decoder[Any]] = []


def _decoder() -> msgspec.json.Decoder[Any]:
    """The union's decoder, made on first use (a run that reads no journal never pays)."""
    if not _DECODER:
        _DECODER.append(msgspec.json.Decoder(Union[_KNOWN]))  # noqa: UP007
    return _DECODER[0]


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
    return cls.from_dict(data)  # type: ignore[return-value]  # every class is in `Event`


def decode_events(raw: Iterable[Mapping[str, Any]]) -> Iterator[Event]:
    """A journal's lines as events (unknown types kept as `UnknownEvent`; broken lines skipped)."""
    for data in raw:
        try:
            yield event_from_dict(data)
        except TypeError:
            continue


def decode_line(raw: bytes) -> Event | None:
    """One journal line as an event; None when it is not JSON or not an event.

    The union's decoder reads it in one call; a type this version does not know,
    or a value of another shape, goes the way `event_from_dict` goes.
    """
    try:
        event: Event = _decoder().decode(raw)
        return event
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        return None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return event_from_dict(data)
    except TypeError:
        return None


def decode_lines(raw: bytes) -> list[Event] | None:
    """Every line of a journal's bytes as events, in one call; None when some line is not
    one of the known events as this version writes them (read it line by line then)."""
    try:
        events: list[Event] = _decoder().decode_lines(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return events


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
    """A copy of a frozen event with `stamps` set (in C: this runs for every event)."""
    return msgspec.structs.replace(event, **stamps)


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
        redact = None if event.transient else self.redact
        if redact is None or isinstance(redact, Redactor):
            values = _text_fields(event)
            if redact.unchanged(values) if redact is not None else inert_already(values):
                return event  # most events: one scan of their joined text
            changed = {}
            for name, value in values.items():
                shown = redact.shown_field(name, value) if redact is not None else \
                    inert_obj(value)
                if shown is not value and shown != value:
                    changed[name] = shown
            return _stamp(event, **changed) if changed else event
        plain = event.to_dict()
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


def _text_fields(event: BaseEvent) -> dict[str, Any]:
    """The fields of `event` that may hold text (not its stamps, numbers or None), by name."""
    values = {}
    for name in event.__struct_fields__:
        value = getattr(event, name)
        if value is not None and type(value) not in _NOT_TEXT and name not in _STAMPS:
            values[name] = value
    return values


def _name(subscriber: Subscriber) -> str:
    """A subscriber as a person reads it: its function's or its class's name."""
    name = getattr(subscriber, "__qualname__", None)
    return str(name) if name else type(subscriber).__qualname__
