"""The OpenAI-compatible provider, driven through httpx against the fake server."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from normalize.errors import ExitStatus, MissingKeyError
from normalize.providers import (
    Completed,
    IncompleteStreamError,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ProviderStatusError,
    TextDelta,
    ThinkingDelta,
    close_client,
    complete,
    create_client,
)
from normalize.providers.openai_compat import OLLAMA_URL, OpenAICompatClient, iter_sse_data
from normalize.retry import RetryPolicy
from normalize.testing.servers import FakeModelServer, Fault, Reply

MODEL = "openai:gpt-4o-mini"
Make = Callable[..., ModelClient]


def test_streamed_reply_and_usage(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add(Reply("Rename the fixture directory.", thinking="The import fails."))
    events: list[ModelEvent] = []
    result = complete(make_client(MODEL), request_, on_event=events.append)

    assert result.text == "Rename the fixture directory."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.text
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "The import fails."
    assert (result.stop_reason, result.model, result.provider) == ("stop", "gpt-4o-mini", "openai")
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0

    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"][0] == {"role": "system", "content": request_.system}
    assert sent.body["messages"][1:] == request_.messages
    assert sent.headers["authorization"] == "Bearer sk-test"


def test_cached_prompt_tokens_are_cache_reads(
    server: FakeModelServer, make_client: Make, request_: ModelRequest
) -> None:
    server.add("one", "two")
    client = make_client(MODEL)
    request_ = replace(request_, system="You review code carefully. " * 300)  # > 1,024 tokens
    first = complete(client, request_)
    second = complete(client, request_)
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens > 0
    assert second.usage.input_tokens == first.usage.input_tokens - second.usage.cache_read_tokens


def test_500_then_success(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(500), "second time lucky")
    assert complete(make_client(MODEL), request_, retry=fast).text == "second time lucky"
    assert len(server.requests) == 2


def test_429_retry_after_is_honoured(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(429, retry_after=1), "later")
    started = time.perf_counter()
    assert complete(make_client(MODEL), request_, retry=fast).text == "later"
    assert time.perf_counter() - started >= 0.95


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean-end", "dropped-connection"])
def test_stream_without_finish_reason_is_retried(
    server: FakeModelServer,
    make_client: Make,
    request_: ModelRequest,
    fast: RetryPolicy,
    abrupt: bool,
) -> None:
    server.add(Fault.cut_stream(after_text="partial", abrupt=abrupt), "complete answer")
    reasons: list[str] = []
    result = complete(
        make_client(MODEL), request_, retry=fast, on_retry=lambda _a, _d, r: reasons.append(r)
    )
    assert result.text == "complete answer"
    assert len(reasons) == 1


def test_error_chunk_mid_stream_is_retried(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.error_event(after_text="partial"), "clean")
    assert complete(make_client(MODEL), request_, retry=fast).text == "clean"


def test_fallback_model(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(*[Fault.status(503)] * 3, model="gpt-4o-mini")
    server.add("from gpt-4.1", model="gpt-4.1")
    moves: list[tuple[str, str, str]] = []
    result = complete(
        make_client(MODEL),
        request_,
        retry=fast,
        fallbacks=[make_client("openai:gpt-4.1")],
        on_fallback=lambda *a: moves.append(a),
    )
    assert result.text == "from gpt-4.1"
    assert server.requests[-1].model == "gpt-4.1"
    assert moves[0][:2] == ("gpt-4o-mini", "gpt-4.1")


def test_401_fails_at_once(
    server: FakeModelServer, make_client: Make, request_: ModelRequest, fast: RetryPolicy
) -> None:
    server.add(Fault.status(401, error_type="invalid_api_key", message="Incorrect API key"))
    with pytest.raises(ProviderStatusError) as info:
        complete(make_client(MODEL), request_, retry=fast)
    assert info.value.status == 401 and not info.value.retryable
    assert str(info.value) == "openai gpt-4o-mini: HTTP 401: invalid_api_key: Incorrect API key"
    assert len(server.requests) == 1


def test_missing_key_only_for_the_official_endpoint(server: FakeModelServer) -> None:
    with pytest.raises(MissingKeyError) as info:
        create_client("openai:gpt-4o", env={})
    message = str(info.value)
    assert info.value.exit_status == ExitStatus.USAGE
    assert "\n" not in message
    for needle in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "--model ollama:MODEL", "--driver user"):
        assert needle in message
    local = create_client("openai:qwen", env={"OPENAI_BASE_URL": server.openai_url})
    assert isinstance(local, OpenAICompatClient) and local.base_url == server.openai_url


def test_ollama_needs_no_key(server: FakeModelServer, request_: ModelRequest) -> None:
    default = create_client("ollama:llama3.1:8b", env={})
    assert isinstance(default, OpenAICompatClient)
    assert (default.name, default.model, default.base_url) == ("ollama", "llama3.1:8b", OLLAMA_URL)

    server.add("local reply")
    host = server.url.removeprefix("http://")
    client = create_client("ollama:llama3.1", env={"OLLAMA_HOST": host})
    try:
        result = complete(client, request_)
    finally:
        close_client(client)
    assert (result.text, result.provider) == ("local reply", "ollama")
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].body["max_tokens"] == request_.max_tokens


def test_official_endpoint_uses_max_completion_tokens() -> None:
    from normalize.providers.openai_compat import build_body

    client = OpenAICompatClient("gpt-5", api_key="k")
    body = build_body(
        ModelRequest(system="", messages=[]), "gpt-5", max_tokens_key=client._max_tokens_key
    )
    assert "max_completion_tokens" in body and "max_tokens" not in body


def test_sse_parsing_of_multiline_and_comment_events() -> None:
    lines = [": keep-alive", "", 'data: {"a":', "data: 1}", "", "event: x", "data:[DONE]", ""]
    assert list(iter_sse_data(iter(lines))) == ['{"a":\n1}', "[DONE]"]


def test_finish_reason_without_done_marker_still_completes() -> None:
    from normalize.providers.openai_compat import _events

    lines = [
        'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}',
        "",
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        "",
    ]
    events = list(_events(iter(lines), "openai m", "m", "openai", None))
    assert isinstance(events[-1], Completed) and events[-1].text == "hi"

    with pytest.raises(IncompleteStreamError):
        list(_events(iter([*lines[:2], "data: [DONE]", ""]), "openai m", "m", "openai", None))
