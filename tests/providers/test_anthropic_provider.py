"""The Anthropic provider, driven through the real SDK against the fake server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from normalize.cancel import CancelToken
from normalize.errors import ExitStatus, MissingKeyError, ProviderError
from normalize.providers import (
    Completed,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ProviderStatusError,
    TextDelta,
    ThinkingDelta,
    TurnCancelledError,
    UsageReport,
    close_client,
    complete,
    create_client,
)
from normalize.retry import RetryPolicy
from normalize.testing.servers import FakeModelServer, Fault, Reply


@pytest.fixture(params=["always", "never"], ids=["sdk", "httpx"])
def make_client(request: pytest.FixtureRequest,
                server: FakeModelServer) -> Iterator[Callable[..., ModelClient]]:
    """Clients at the fake server: the official SDK, and the httpx path used before it loads."""
    made: list[Any] = []

    def make(spec: str, **opts: Any) -> ModelClient:
        client = create_client(spec, base_url=server.url, env=KEYS, sdk=request.param, **opts)
        made.append(client)
        return client

    yield make
    for client in made:
        close_client(client)


KEYS = {"ANTHROPIC_API_KEY": "sk-ant-test"}
MODEL = "anthropic:claude-haiku-4-5"
LONG_SYSTEM = "You are a terse assistant working on a codebase. " * 400  # past Haiku 4.5's 4,096
Make = Callable[..., ModelClient]


def texts(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_streamed_reply_usage_and_cached_system(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Reply("The test fails because the fixture path is wrong."))
    events: list[ModelEvent] = []
    request_ = replace(request_, system=LONG_SYSTEM)
    result = complete(make_client(MODEL), request_, on_event=events.append, retry=fast)

    assert result.text == "The test fails because the fixture path is wrong."
    assert texts(events) == result.text
    assert sum(isinstance(e, TextDelta) for e in events) > 1
    assert events[-1] == result
    assert (result.model, result.provider, result.stop_reason) == (
        "claude-haiku-4-5",
        "anthropic",
        "end_turn",
    )
    # First sight of the system prompt: written to the cache, not read from it.
    assert result.usage.cache_write_tokens > 0 and result.usage.cache_read_tokens == 0
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert isinstance(events[0], UsageReport)

    body = server.requests[0].body
    assert body["stream"] is True
    assert body["model"] == "claude-haiku-4-5"
    assert body["system"] == [
        {"type": "text", "text": request_.system, "cache_control": {"type": "ephemeral"}}
    ]
    assert "thinking" not in body
    assert server.requests[0].path == "/v1/messages"


def test_second_turn_reads_the_cached_system_prompt(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add("one", "two", "three")
    client = make_client(MODEL)
    first = complete(client, replace(request_, system=LONG_SYSTEM))
    second = complete(client, replace(request_, system=LONG_SYSTEM))
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens > 0
    # a system prompt under the model's minimum cacheable length is not marked at all
    complete(client, request_)
    assert "cache_control" not in server.requests[-1].body["system"][0]


def test_cache_system_off_and_temperature(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add("ok")
    request = ModelRequest(
        system="sys", messages=request_.messages, cache_system=False, temperature=0.2
    )
    complete(make_client(MODEL), request)
    body = server.requests[0].body
    assert body["system"] == [{"type": "text", "text": "sys"}]
    assert body["temperature"] == 0.2


def test_thinking_deltas_when_enabled(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add(Reply("Use a fixture.", thinking="The path is relative to the cwd."))
    events: list[ModelEvent] = []
    request = ModelRequest(system=request_.system, messages=request_.messages, thinking=True)
    result = complete(make_client(MODEL), request, on_event=events.append)

    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == result.thinking == "The path is relative to the cwd."
    assert result.text == "Use a fixture."
    sent = server.requests[0].body
    assert sent["thinking"]["type"] == "enabled"
    assert 1024 <= sent["thinking"]["budget_tokens"] < sent["max_tokens"]


def test_deprecated_model_name_does_not_leak_sdk_warnings(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    # pytest turns warnings into errors here; the SDK warns about this model.
    server.add("fine")
    assert complete(make_client("anthropic:claude-sonnet-4-5"), request_).text == "fine"


def test_base_url_from_environment(server: FakeModelServer, request_: ModelRequest) -> None:
    server.add("via env")
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.url}
    client = create_client("claude-haiku-4-5", env=env)
    try:
        assert complete(client, request_).text == "via env"
    finally:
        close_client(client)


def test_529_then_success(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(529), "recovered")
    retries: list[tuple[int, float, str]] = []
    result = complete(
        make_client(MODEL), request_, retry=fast, on_retry=lambda *a: retries.append(a)
    )
    assert result.text == "recovered"
    assert len(server.requests) == 2
    assert [(a, "529" in r) for a, _, r in retries] == [(2, True)]


def test_429_retry_after_is_honoured(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(429, retry_after=1), "after the wait")
    delays: list[float] = []
    started = time.perf_counter()
    result = complete(
        make_client(MODEL), request_, retry=fast, on_retry=lambda _a, d, _r: delays.append(d)
    )
    elapsed = time.perf_counter() - started
    assert result.text == "after the wait"
    assert delays == [1.0]
    assert server.requests[1].at - server.requests[0].at >= 0.95
    assert elapsed >= 0.95


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean-end", "dropped-connection"])
def test_cut_stream_discards_partial_text_and_retries(
    server: FakeModelServer,
    make_client: Make,
    request_: ModelRequest,
    fast: RetryPolicy,
    abrupt: bool,
) -> None:
    server.add(Fault.cut_stream(after_text="partial", abrupt=abrupt), "the whole reply")
    shown: list[str] = []
    reasons: list[str] = []

    def on_event(event: ModelEvent) -> None:
        if isinstance(event, TextDelta):
            shown.append(event.text)

    def on_retry(_attempt: int, _delay: float, reason: str) -> None:
        reasons.append(reason)
        shown.clear()  # what a UI does: forget the void partial text

    result = complete(
        make_client(MODEL), request_, retry=fast, on_event=on_event, on_retry=on_retry
    )
    assert result.text == "the whole reply"
    assert "".join(shown) == "the whole reply"
    assert len(reasons) == 1
    assert ("connection" in reasons[0]) if abrupt else ("message_stop" in reasons[0])


def test_error_event_mid_stream_is_retried(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.error_event(after_text="partial"), "clean")
    reasons: list[str] = []
    result = complete(
        make_client(MODEL), request_, retry=fast, on_retry=lambda _a, _d, r: reasons.append(r)
    )
    assert result.text == "clean"
    assert "overloaded_error" in reasons[0]


def test_retries_exhausted_then_fallback_answers(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(529), Fault.status(500), Fault.status(529), model="claude-haiku-4-5")
    server.add("the fallback speaks", model="claude-opus-4-1")
    fallbacks: list[tuple[str, str, str]] = []
    result = complete(
        make_client(MODEL),
        request_,
        retry=fast,
        fallbacks=[make_client("anthropic:claude-opus-4-1")],
        on_fallback=lambda *a: fallbacks.append(a),
    )
    assert result.text == "the fallback speaks"
    assert result.model == "claude-opus-4-1"
    assert [r.model for r in server.requests] == ["claude-haiku-4-5"] * 3 + ["claude-opus-4-1"]
    assert len(fallbacks) == 1
    assert fallbacks[0][:2] == ("claude-haiku-4-5", "claude-opus-4-1")
    assert "529" in fallbacks[0][2]
    server.assert_done()


def test_every_model_failing_names_them_all(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add(Fault.status(529), model="claude-haiku-4-5")
    server.add(Fault.status(529), model="claude-opus-4-1")
    with pytest.raises(ProviderError) as info:
        complete(
            make_client(MODEL),
            request_,
            retry=RetryPolicy(strategy="none"),
            fallbacks=[make_client("anthropic:claude-opus-4-1")],
        )
    assert "claude-haiku-4-5, claude-opus-4-1" in str(info.value)


def test_retry_after_beyond_a_minute_fails_without_waiting(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(429, retry_after=120))
    started = time.perf_counter()
    with pytest.raises(ProviderStatusError) as info:
        complete(make_client(MODEL), request_, retry=fast)
    assert time.perf_counter() - started < 5
    err = info.value
    assert (err.status, err.retry_after, err.retryable) == (429, 120.0, False)
    assert "120 s" in str(err) and "\n" not in str(err)
    assert len(server.requests) == 1


def test_401_fails_at_once(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(401, message="invalid x-api-key"))
    with pytest.raises(ProviderStatusError) as info:
        complete(
            make_client(MODEL), request_, retry=fast, fallbacks=[make_client("claude-opus-4-1")]
        )
    err = info.value
    assert err.status == 401 and not err.retryable
    assert str(err) == (
        "anthropic claude-haiku-4-5: HTTP 401: authentication_error: invalid x-api-key"
    )
    assert len(server.requests) == 1


def test_missing_key_is_one_line_usage_error() -> None:
    with pytest.raises(MissingKeyError) as info:
        create_client("anthropic:claude-haiku-4-5", env={})
    message = str(info.value)
    assert info.value.exit_status == ExitStatus.USAGE
    assert int(info.value.exit_status) == 2
    assert "\n" not in message
    for needle in (
        "ANTHROPIC_API_KEY",
        "--model ollama:MODEL",
        "normalize resume ID --driver user",
    ):
        assert needle in message


def test_cancel_interrupts_a_stalled_stream(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add(Fault.stall(after_text="thinking about it", seconds=30))
    client = make_client(MODEL)
    cancel = CancelToken()
    seen: list[ModelEvent] = []

    def on_event(event: ModelEvent) -> None:
        seen.append(event)
        if isinstance(event, TextDelta):
            threading.Timer(0.1, cancel.cancel).start()

    started = time.perf_counter()
    with pytest.raises(TurnCancelledError):
        complete(client, request_, cancel=cancel, on_event=on_event)
    assert time.perf_counter() - started < 5
    assert not any(isinstance(e, Completed) for e in seen)


def test_cancel_interrupts_the_wait_between_attempts(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add(Fault.status(529, retry_after=30))
    cancel = CancelToken()
    started = time.perf_counter()
    with pytest.raises(TurnCancelledError):
        complete(
            make_client(MODEL),
            request_,
            cancel=cancel,
            on_retry=lambda *_: threading.Timer(0.1, cancel.cancel).start(),
        )
    assert time.perf_counter() - started < 5


def test_server_records_arrival_and_rejects_unscripted_requests(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    before = time.perf_counter()
    with pytest.raises(ProviderStatusError, match="no scripted response left") as info:
        complete(make_client(MODEL), request_, retry=fast)
    assert info.value.status == 400
    assert server.first_request_at is not None
    assert before <= server.first_request_at <= time.perf_counter()
    with pytest.raises(AssertionError, match="1 request"):
        server.assert_done()
    server.unexpected.clear()
