"""The model boundary: events, requests, the ModelClient protocol and `complete`.

A provider streams `ModelEvent`s for one request. A turn counts only when its
`Completed` event arrives; a stream that stops short, an error event after
partial text, or a retryable HTTP status all surface as a `ProviderError` with
`retryable=True`, and `complete` retries, then falls back to other models.

    ProviderError (normalize.errors)
    ├── ProviderStatusError   an HTTP status from the provider; `status`, `retry_after`
    ├── IncompleteStreamError the stream ended before its final event (retryable)
    └── TurnCancelledError    the cancel token was set during the turn
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from normalize.cancel import CancelToken
from normalize.errors import ProviderError
from normalize.retry import RetryPolicy

MAX_RETRY_AFTER = 60.0
"""Longest `retry-after` honoured; a provider asking for more fails the model at once."""

MODEL_RETRY = RetryPolicy(
    strategy="exponential", max_attempts=4, base_delay=1.0, max_delay=30.0, jitter=0.25
)
"""The default retry policy for model calls."""


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply text."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of the model's visible reasoning."""

    text: str
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True)
class UsageReport:
    """Tokens spent by one turn, so far or in all.

    `input_tokens` excludes cached tokens (the Anthropic convention); OpenAI's
    `prompt_tokens` is split into uncached input and `cache_read_tokens`.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    type: Literal["usage"] = "usage"

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


@dataclass(frozen=True)
class Completed:
    """The end of a successful turn: the whole reply and what it cost in tokens."""

    text: str
    thinking: str = ""
    stop_reason: str = "end_turn"
    usage: UsageReport = field(default_factory=UsageReport)
    model: str = ""
    provider: str = ""
    type: Literal["completed"] = "completed"

    @property
    def spec(self) -> str:
        """`PROVIDER:MODEL` of the model that answered (the key for pricing)."""
        return f"{self.provider}:{self.model}" if self.provider else self.model


ModelEvent = TextDelta | ThinkingDelta | UsageReport | Completed


@dataclass(frozen=True)
class ModelRequest:
    """One turn to send: a system prompt and alternating user/assistant messages."""

    system: str
    messages: list[dict[str, Any]]
    model: str = ""
    max_tokens: int = 4096
    thinking: bool = False
    cache_system: bool = True
    temperature: float | None = None
    thinking_budget: int | None = None
    cache_messages: bool = False
    """Mark the newest message for caching too (a moving breakpoint for a growing history)."""
    cache_key: str = ""
    """A stable key for the provider's prompt cache (OpenAI's `prompt_cache_key`): the task id."""

    @property
    def last_message(self) -> str:
        """The text of the last message, for error messages and logs."""
        if not self.messages:
            return ""
        return str(self.messages[-1].get("content", ""))


@runtime_checkable
class ModelClient(Protocol):
    """A model provider; `stream` is synchronous (the engine runs it in a thread)."""

    name: str
    model: str

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        """Send `request` and yield its events; a turn is complete only at `Completed`."""
        ...


def close_client(client: ModelClient) -> None:
    """Release a client's connections, for clients that hold any (`close()` is optional)."""
    close = getattr(client, "close", None)
    if callable(close):
        close()


class ProviderStatusError(ProviderError):
    """The provider answered with an HTTP error status (or an error event)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool = False,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable, hint=hint)
        self.status = status
        self.retry_after = retry_after


class IncompleteStreamError(ProviderError):
    """The stream ended before the provider's final event; the partial turn is void."""

    def __init__(self, message: str, *, partial: str = "") -> None:
        super().__init__(message, retryable=True)
        self.partial = partial


class TurnCancelledError(ProviderError):
    """The cancel token was set while the turn was streaming or waiting to retry."""

    def __init__(self, message: str = "model call cancelled") -> None:
        super().__init__(message, retryable=False)


RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def status_retryable(status: int) -> bool:
    """Whether an HTTP status is worth retrying: rate limits, overload, server errors."""
    return status in RETRYABLE_STATUSES or status >= 500


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so a message fits one line, truncated to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `retry-after` header: delta-seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    import email.utils  # pulls in socket and the email package: only when needed

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(when.timestamp() - current, 0.0)


def headers_retry_after(headers: Any) -> float | None:
    """The wait a response's headers ask for (`retry-after-ms` first, then `retry-after`)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def status_error(
    label: str,
    status: int,
    detail: str,
    *,
    retry_after: float | None = None,
    retryable: bool | None = None,
) -> ProviderStatusError:
    """A one-line ProviderStatusError for `status`, retryable per `status_retryable`."""
    hint = None
    if status in (401, 403):
        hint = "check the API key for this provider"
    message = one_line(f"{label}: HTTP {status}: {detail}" if detail else f"{label}: HTTP {status}")
    return ProviderStatusError(
        message,
        status=status,
        retry_after=retry_after,
        retryable=status_retryable(status) if retryable is None else retryable,
        hint=hint,
    )


T = TypeVar("T")

CANCEL_POLL = 0.05
"""How often (seconds) a request waiting for its response looks at the cancel token."""


def await_response(send: Callable[[], T], cancel: CancelToken | None,
                   discard: Callable[[T], None]) -> T:
    """`send()` (a request, until its response's headers arrive), given up on cancel.

    A slow server can take many seconds to answer; a blocked connect or read
    cannot be woken from another thread before there is a response to close,
    so the request runs in a daemon thread and this one waits on the token.
    On cancel it raises `TurnCancelledError` at once; a response that still
    arrives later is passed to `discard` (closed) by that thread.
    """
    if cancel is None:
        return send()
    box: dict[str, Any] = {}
    finished = threading.Event()
    lock = threading.Lock()

    def work() -> None:
        try:
            box["value"] = send()
        except BaseException as err:  # handed to the waiting thread, raised there
            box["error"] = err
        with lock:
            finished.set()
            late = box.get("abandoned", False)
        if late and "value" in box:
            try:
                discard(box["value"])
            except Exception:
                pass

    threading.Thread(target=work, name="normalize-model-request", daemon=True).start()
    try:
        while not finished.wait(CANCEL_POLL):
            if cancel.cancelled:
                raise TurnCancelledError()
    except BaseException:  # cancelled (or a second Ctrl-C): the response is discarded
        with lock:
            box["abandoned"] = True
            arrived = finished.is_set() and "value" in box
        if arrived:
            discard(box["value"])
        raise
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


OnEvent = Callable[[ModelEvent], None]
OnRetry = Callable[[int, float, str], None]
OnFallback = Callable[[str, str, str], None]


def _sleep(seconds: float, cancel: CancelToken | None) -> None:
    """Wait `seconds`, waking early (and raising) when `cancel` is set."""
    if seconds <= 0:
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        return
    if cancel is None:
        time.sleep(seconds)
    elif cancel.wait(seconds):
        raise TurnCancelledError()


def _run_once(
    client: ModelClient,
    request: ModelRequest,
    cancel: CancelToken | None,
    on_event: OnEvent | None,
) -> Completed:
    """Stream one attempt to its end; a missing `Completed` is a retryable failure."""
    text: list[str] = []
    events = client.stream(request, cancel)
    try:
        for event in events:
            if cancel is not None and cancel.cancelled:
                raise TurnCancelledError()
            if on_event is not None:
                on_event(event)
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Completed):
                return replace(
                    event,
                    model=event.model or request.model or client.model,
                    provider=event.provider or client.name,
                )
    except TurnCancelledError:
        raise
    except Exception as err:
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError() from err
        raise
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()  # release the response now, not when the generator is collected
    partial = "".join(text)
    raise IncompleteStreamError(
        f"{client.name} {request.model or client.model}: the stream ended before the reply "
        f"was complete ({len(partial)} characters received)",
        partial=partial,
    )


def _label(err: ProviderError) -> str:
    return one_line(str(err), 200)


def _gave_up(err: ProviderError, attempts: int) -> ProviderError:
    """The error to raise once `attempts` attempts all failed with `err`."""
    if attempts <= 1:
        return err
    message = one_line(f"{err} (gave up after {attempts} attempts)")
    if isinstance(err, ProviderStatusError):
        failure: ProviderError = ProviderStatusError(
            message, status=err.status, retry_after=err.retry_after, retryable=True, hint=err.hint
        )
    else:
        failure = ProviderError(message, retryable=True, hint=err.hint)
    failure.__cause__ = err
    return failure


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def sendable(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8.

    A file name that is not valid UTF-8 reaches Python as lone surrogates
    (`os.fsdecode`); a provider's JSON parser rejects them ("no low surrogate
    in string"), so they are replaced at this boundary, and only here: the
    task and its journal keep the exact name.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        return [sendable(item) for item in value]
    if isinstance(value, dict):
        return {key: sendable(item) for key, item in value.items()}
    return value


def complete(
    client: ModelClient,
    request: ModelRequest,
    *,
    on_event: OnEvent | None = None,
    retry: RetryPolicy = MODEL_RETRY,
    cancel: CancelToken | None = None,
    fallbacks: Sequence[ModelClient] = (),
    on_retry: OnRetry | None = None,
    on_fallback: OnFallback | None = None,
) -> Completed:
    """Run one turn to completion, retrying and falling back; return its `Completed`.

    Retryable failures (429, 529, 5xx, connection errors, cut streams, error
    events) are retried per `retry`, honouring `retry-after` up to
    `MAX_RETRY_AFTER` seconds; a longer wait ends this model's attempts at
    once. Then each of `fallbacks` is tried in order with the same policy.
    Non-retryable failures (400, 401, 403, 404, ...) raise at once.

    `on_retry(attempt, delay, reason)` fires before attempt number `attempt`
    (2 and up) starts, `on_fallback(from_model, to_model, reason)` before a
    fallback starts: in both cases any text streamed so far is void.
    """
    request = replace(request, system=sendable(request.system),
                      messages=sendable(request.messages))
    clients = [client, *fallbacks]
    last: ProviderError | None = None
    for index, current in enumerate(clients):
        model = (request.model or current.model) if index == 0 else current.model
        attempt_request = replace(request, model=model)
        if index > 0:
            previous = clients[index - 1]
            prev_model = (request.model or previous.model) if index == 1 else previous.model
            if on_fallback is not None:
                on_fallback(prev_model, model, _label(last) if last else "")
        attempts = retry.attempts
        for attempt in range(1, attempts + 1):
            if cancel is not None and cancel.cancelled:
                raise TurnCancelledError()
            try:
                return _run_once(current, attempt_request, cancel, on_event)
            except TurnCancelledError:
                raise
            except ProviderError as err:
                last = err
                if not err.retryable:
                    raise
                wait = getattr(err, "retry_after", None)
                if wait is not None and wait > MAX_RETRY_AFTER:
                    last = ProviderStatusError(
                        one_line(
                            f"{err} (the provider asks to wait {wait:.0f} s, more than "
                            f"{MAX_RETRY_AFTER:.0f} s; try again later or pick another "
                            "model with --model)"
                        ),
                        status=getattr(err, "status", None),
                        retry_after=wait,
                        retryable=False,
                    )
                    break
                if attempt >= attempts:
                    last = _gave_up(err, attempts)
                    break
                delay = retry.delay(attempt) if wait is None else wait
                if on_retry is not None:
                    on_retry(attempt + 1, delay, _label(err))
                _sleep(delay, cancel)
    assert last is not None
    if len(clients) > 1:
        models = ", ".join([request.model or client.model] + [c.model for c in fallbacks])
        raise ProviderError(
            one_line(f"every model failed ({models}); last: {last}"),
            retryable=last.retryable,
            hint=last.hint,
        ) from last
    raise last
