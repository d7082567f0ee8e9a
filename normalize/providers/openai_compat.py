"""OpenAI-compatible chat completions over httpx: OpenAI, Ollama, llama.cpp, vLLM.

One streamed POST to `{base_url}/chat/completions`; the server-sent `data:`
chunks carry text deltas, reasoning deltas (`reasoning_content` or
`reasoning`), a `finish_reason` and, last, the usage. A stream without a
`finish_reason` is incomplete and retried. httpx is imported on first use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from normalize.cancel import CancelToken
from normalize.errors import MissingKeyError, ProviderError
from normalize.providers.base import (
    Completed,
    IncompleteStreamError,
    ModelEvent,
    ModelRequest,
    ProviderStatusError,
    TextDelta,
    ThinkingDelta,
    TurnCancelledError,
    UsageReport,
    headers_retry_after,
    one_line,
    status_error,
)
from normalize.providers.transport import (
    LazyPool,
    is_transport_error,
    loopback_address,
    nothing_listens,
    refused,
    stream_lines,
)

OPENAI_URL = "https://api.openai.com/v1"
OLLAMA_URL = "http://localhost:11434/v1"
DEFAULT_TIMEOUT = 600.0

MISSING_KEY = (
    "no API key for openai: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
    "OpenAI-compatible server), or use a local model with --model ollama:MODEL, "
    "or drive the task yourself with `normalize resume ID --driver user`"
)

class ServerDownError(MissingKeyError):
    """Nothing listens at a base URL on this machine: the local model server is not running."""

    def __init__(self, label: str, provider: str, host: str, port: int) -> None:
        where = f"{host}:{port}"
        question = (f"is Ollama running at {where}? Start it with `ollama serve` (OLLAMA_HOST "
                    "or --base-url for another address)" if provider == "ollama" else
                    f"is the model server running at {where}? (--base-url names another)")
        super().__init__(f"{label}: connection refused: {question}")


NON_RETRYABLE_CODES = frozenset({"insufficient_quota", "invalid_api_key", "model_not_found"})


def build_body(request: ModelRequest, model: str, *, max_tokens_key: str,
               cache_key: bool = True) -> dict[str, Any]:
    """The JSON body of a streamed chat-completions request.

    `cache_key`: send the request's `prompt_cache_key` (OpenAI routes requests
    with one key to the same prompt cache; local servers are not sent it).
    """
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend({"role": m["role"], "content": m["content"]} for m in request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        max_tokens_key: request.max_tokens,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.cache_key and cache_key:
        body["prompt_cache_key"] = request.cache_key  # one task's requests share a cache
    return body


def iter_sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The `data` payloads of a server-sent event stream, one per event."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


class OpenAICompatClient:
    """A ModelClient for any server speaking OpenAI's streamed chat completions."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_URL,
        api_key: str | None = None,
        name: str = "openai",
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens_key: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        if max_tokens_key is None:
            # OpenAI's newer models refuse `max_tokens`; most local servers only know it.
            official = urlsplit(self.base_url).hostname == "api.openai.com"
            max_tokens_key = "max_completion_tokens" if official else "max_tokens"
        self._max_tokens_key = max_tokens_key
        self._http = LazyPool(self._make_http)

    def __repr__(self) -> str:
        return (
            f"OpenAICompatClient(name={self.name!r}, model={self.model!r}, "
            f"base_url={self.base_url!r})"
        )

    def _make_http(self) -> Any:
        import httpx

        return httpx.Client(
            timeout=httpx.Timeout(self._timeout, connect=30.0),
            headers={"accept": "text/event-stream"},
        )

    def _client(self) -> Any:
        """The httpx client, created (and httpx imported) on first use."""
        return self._http.get()

    def check_server(self) -> None:
        """Raise ServerDownError when the base URL is on this machine and nothing listens there."""
        local = loopback_address(self.base_url)
        if local is not None and nothing_listens(*local):
            raise ServerDownError(f"{self.name} {self.model}", self.name, *local)

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        """Send `request` and yield its events; raises ProviderError on any failure."""
        model = request.model or self.model
        label = f"{self.name} {model}"
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        body = build_body(request, model, max_tokens_key=self._max_tokens_key,
                          cache_key=self.name == "openai")
        http = self._client()
        try:
            sent = http.build_request(
                "POST", f"{self.base_url}/chat/completions", json=body, headers=headers
            )
            lines = stream_lines(http, sent, cancel, lambda failed: _status_failure(label, failed))
            yield from _events(lines, label, model, self.name, cancel)
        except ProviderError:
            raise
        except Exception as err:
            if cancel is not None and cancel.cancelled:
                raise TurnCancelledError() from err
            local = loopback_address(self.base_url)
            if local is not None and refused(err):  # a local server not started: no retry helps
                raise ServerDownError(label, self.name, *local) from err
            if is_transport_error(err):
                raise ProviderError(
                    one_line(f"{label}: connection failed: {err}"), retryable=True
                ) from err
            raise


def _status_failure(label: str, response: Any) -> ProviderStatusError:
    """A ProviderStatusError for an HTTP error response."""
    detail = response.text
    code = ""
    try:
        error = json.loads(detail).get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or error.get("type") or "")
            detail = f"{code}: {error.get('message', '')}" if code else str(error.get("message"))
        elif isinstance(error, str):
            detail = error
    except (ValueError, AttributeError):
        pass
    retryable = None if code not in NON_RETRYABLE_CODES else False
    return status_error(
        label,
        response.status_code,
        detail,
        retry_after=headers_retry_after(response.headers),
        retryable=retryable,
    )


def _events(
    lines: Iterator[str], label: str, model: str, provider: str, cancel: CancelToken | None
) -> Iterator[ModelEvent]:
    """Translate chat-completion chunks; fail when no `finish_reason` arrives."""
    text: list[str] = []
    thinking: list[str] = []
    usage = UsageReport()
    finish = ""
    for data in iter_sse_data(lines):
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        if data.strip() == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError as err:
            raise ProviderError(
                one_line(f"{label}: bad stream chunk: {data}"), retryable=True
            ) from err
        if not isinstance(chunk, dict):
            continue
        if chunk.get("error"):
            raise _stream_error(label, chunk["error"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                thinking.append(reasoning)
                yield ThinkingDelta(reasoning)
            content = delta.get("content")
            if isinstance(content, str) and content:
                text.append(content)
                yield TextDelta(content)
            finish = choice.get("finish_reason") or finish
        if chunk.get("usage"):
            usage = _usage(chunk["usage"])
            yield usage
    if not finish:
        partial = "".join(text)
        raise IncompleteStreamError(
            f"{label}: the stream ended without a finish_reason "
            f"({len(partial)} characters received)",
            partial=partial,
        )
    yield Completed(
        text="".join(text),
        thinking="".join(thinking),
        stop_reason=finish,
        usage=usage,
        model=model,
        provider=provider,
    )


def _usage(data: Mapping[str, Any]) -> UsageReport:
    """A UsageReport from an OpenAI usage object; cached prompt tokens count as reads."""
    prompt = int(data.get("prompt_tokens") or 0)
    details = data.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    return UsageReport(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _stream_error(label: str, error: Any) -> ProviderStatusError:
    """An error object sent inside the stream (after a 200 status)."""
    if isinstance(error, dict):
        code = str(error.get("code") or error.get("type") or "error")
        message = str(error.get("message", ""))
    else:
        code, message = "error", str(error)
    retryable = code not in NON_RETRYABLE_CODES and "invalid" not in code
    return ProviderStatusError(
        one_line(f"{label}: {code} during the stream: {message}"), retryable=retryable
    )


def create(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> OpenAICompatClient:
    """Provider factory for `openai:MODEL`: OPENAI_API_KEY, OPENAI_BASE_URL or `base_url`."""
    environ = os.environ if env is None else env
    url = base_url or environ.get("OPENAI_BASE_URL") or OPENAI_URL
    api_key = opts.pop("api_key", None) or environ.get("OPENAI_API_KEY") or None
    if not api_key and urlsplit(url).hostname == "api.openai.com":
        raise MissingKeyError(MISSING_KEY)
    return OpenAICompatClient(model, base_url=url, api_key=api_key, **opts)


def create_ollama(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> OpenAICompatClient:
    """Provider factory for `ollama:MODEL`: a local server, no key (OLLAMA_HOST moves it)."""
    environ = os.environ if env is None else env
    url = base_url
    if url is None and environ.get("OLLAMA_HOST"):
        host = environ["OLLAMA_HOST"].rstrip("/")
        url = (host if "://" in host else f"http://{host}") + "/v1"
    return OpenAICompatClient(model, base_url=url or OLLAMA_URL, name="ollama", **opts)
