"""The Messages API over plain httpx, for the requests sent before the SDK has loaded.

`import anthropic` costs about a second of CPU (its thousands of typed
models), and on the GIL a background import slows the main thread as much as
it helps. So a new `AnthropicClient` sends its first request with httpx
(imported in a fraction of that) and only then starts loading the SDK in the
background, while the model is thinking; once the SDK is loaded, every
request goes through it. Both paths send the same body (`build_params`) and
yield the same events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from normalize.cancel import CancelToken
from normalize.errors import ProviderError
from normalize.providers.base import (
    Completed,
    IncompleteStreamError,
    ModelEvent,
    ProviderStatusError,
    TextDelta,
    ThinkingDelta,
    TurnCancelledError,
    UsageReport,
    headers_retry_after,
    one_line,
    status_error,
)
from normalize.providers.openai_compat import iter_sse_data
from normalize.providers.transport import is_transport_error, stream_lines

API_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


def make_http(timeout: float) -> Any:
    """An httpx client for the Messages API (httpx is imported here)."""
    import httpx

    return httpx.Client(timeout=httpx.Timeout(timeout, connect=30.0))


def stream_messages(
    http: Any,
    params: Mapping[str, Any],
    *,
    base_url: str | None,
    api_key: str | None,
    auth_token: str | None,
    label: str,
    model: str,
    cancel: CancelToken | None,
) -> Iterator[ModelEvent]:
    """POST `params` (the SDK's keyword arguments) streamed; yield the turn's events."""
    body = {k: v for k, v in params.items() if k != "extra_body"}
    body.update(params.get("extra_body") or {})
    body["stream"] = True
    headers = {"content-type": "application/json", "accept": "text/event-stream",
               "anthropic-version": API_VERSION}
    if api_key:
        headers["x-api-key"] = api_key
    elif auth_token:
        headers["authorization"] = f"Bearer {auth_token}"
    url = f"{(base_url or API_URL).rstrip('/')}/v1/messages"
    if cancel is not None and cancel.cancelled:
        raise TurnCancelledError()
    try:
        sent = http.build_request("POST", url, json=body, headers=headers)
        lines = stream_lines(http, sent, cancel, lambda failed: _status_failure(label, failed))
        yield from _events(lines, label, model, cancel)
    except ProviderError:
        raise
    except Exception as err:
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError() from err
        if is_transport_error(err):
            raise ProviderError(one_line(f"{label}: connection failed: {err}"),
                                retryable=True) from err
        raise


def _status_failure(label: str, response: Any) -> ProviderStatusError:
    detail = response.text
    try:
        error = json.loads(detail).get("error") or {}
        if isinstance(error, dict) and error.get("type"):
            detail = f"{error['type']}: {error.get('message', '')}"
    except (ValueError, AttributeError):
        pass
    return status_error(label, response.status_code, detail,
                        retry_after=headers_retry_after(response.headers))


def _usage(usage: UsageReport, data: Any) -> UsageReport:
    """Fold a usage object into `usage`; the API's counts are cumulative."""
    if not isinstance(data, Mapping):
        return usage

    def pick(name: str, old: int) -> int:
        value = data.get(name)
        return old if value is None else int(value)

    return UsageReport(
        input_tokens=pick("input_tokens", usage.input_tokens),
        output_tokens=pick("output_tokens", usage.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", usage.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", usage.cache_write_tokens),
    )


def _events(lines: Iterator[str], label: str, model: str,
            cancel: CancelToken | None) -> Iterator[ModelEvent]:
    """Translate the Messages stream; fail when `message_stop` never comes."""
    text: list[str] = []
    thinking: list[str] = []
    usage = UsageReport()
    stop_reason = ""
    for data in iter_sse_data(lines):
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        try:
            event = json.loads(data)
        except ValueError as err:
            raise ProviderError(one_line(f"{label}: bad stream event: {data}"),
                                retryable=True) from err
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_start":
            usage = _usage(usage, (event.get("message") or {}).get("usage"))
            yield usage
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                text.append(delta["text"])
                yield TextDelta(delta["text"])
            elif delta.get("type") == "thinking_delta" and delta.get("thinking"):
                thinking.append(delta["thinking"])
                yield ThinkingDelta(delta["thinking"])
        elif kind == "message_delta":
            stop_reason = (event.get("delta") or {}).get("stop_reason") or stop_reason
            usage = _usage(usage, event.get("usage"))
            yield usage
        elif kind == "message_stop":
            yield Completed(text="".join(text), thinking="".join(thinking),
                            stop_reason=stop_reason or "end_turn", usage=usage, model=model,
                            provider="anthropic")
            return
        elif kind == "error":
            error = event.get("error") or {}
            error_type = str(error.get("type") or "error")
            raise ProviderStatusError(
                one_line(f"{label}: {error_type} during the stream: {error.get('message', '')}"),
                retryable=error_type in RETRYABLE_ERROR_TYPES)
    partial = "".join(text)
    raise IncompleteStreamError(
        f"{label}: the stream ended before message_stop ({len(partial)} characters received)",
        partial=partial)
