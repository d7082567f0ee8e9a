"""Anthropic models through the official SDK, streamed as raw Messages events.

The SDK takes about a second to import, so a client's requests go over plain
httpx (`anthropic_http`) until it has loaded: the first reply starting is the
cue to import it in a background thread (`prefetch_import`), while the model
thinks; `sdk="always"` uses the SDK from the first request. The SDK's own retries
are off (`max_retries=0`): `providers.base.complete` retries, so that a UI can
be told about each attempt and a cut stream is retried like any other failure.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from normalize.cancel import CancelToken
from normalize.errors import MissingKeyError, ProviderError
from normalize.providers.anthropic_http import RETRYABLE_ERROR_TYPES, make_http, stream_messages
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
    await_response,
    headers_retry_after,
    one_line,
    status_error,
)
from normalize.providers.transport import LazyPool, abort_response, is_transport_error

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
MIN_THINKING_BUDGET = 1024
DEFAULT_TIMEOUT = 600.0

MISSING_KEY = (
    "no API key for anthropic: set ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL for a proxy), "
    "or use a local model with --model ollama:MODEL, "
    "or drive the task yourself with `normalize resume ID --driver user`"
)

_SDK_NOTICES = r"(The model '.*' is deprecated|Using Claude with .* is deprecated)"



_import_thread: threading.Thread | None = None
_import_lock = threading.Lock()


def prefetch_import() -> threading.Thread:
    """Start `import anthropic` in a daemon thread (once) and return the thread."""
    global _import_thread

    def load() -> None:
        import anthropic  # noqa: F401

    with _import_lock:
        if _import_thread is None:
            _import_thread = threading.Thread(target=load, name="normalize-import-anthropic",
                                              daemon=True)
            _import_thread.start()
        return _import_thread


def sdk_ready() -> bool:
    """Whether the SDK is loaded (and no background import of it is still running)."""
    if "anthropic" not in sys.modules:
        return False
    thread = _import_thread
    return thread is None or not thread.is_alive()


# The shortest prefix each model family caches (Anthropic's documented minimum cacheable
# prompt lengths, in tokens); a shorter marked prefix is silently not cached. The first
# pattern that matches the model name wins.
MIN_CACHEABLE: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    (re.compile(pattern), tokens)
    for pattern, tokens in (
        (r"opus-4-(5|6)\b", 4096),
        (r"haiku-4-5", 4096),
        (r"opus-4-7\b", 2048),
        (r"sonnet-4-6\b", 2048),
        (r"haiku-3|3-5-haiku|3-haiku", 2048),
        (r"(opus|sonnet|fable|mythos)-5", 512),
    )
)
DEFAULT_MIN_CACHEABLE = 1024
"""Sonnet 4.5, Sonnet 4, Opus 4.1, Opus 4, Sonnet 3.7 and any model not listed."""

CACHE_MARK = {"type": "ephemeral"}


def min_cacheable_tokens(model: str) -> int:
    """The minimum cacheable prompt length of `model`'s family, in tokens."""
    name = model.lower()
    for pattern, tokens in MIN_CACHEABLE:
        if pattern.search(name):
            return tokens
    return DEFAULT_MIN_CACHEABLE


def prefix_tokens(chars: int) -> int:
    """Tokens in a prefix of `chars` characters, estimated at 4 characters a token.

    The same estimate as the usage the local test servers report; a mark the
    estimate misjudges costs little (the API ignores one below its minimum).
    """
    return (chars + 3) // 4


def build_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments for `messages.create` (without `stream`).

    The system prompt (the stable prefix) is marked for caching when it is
    long enough for the model's family; with `cache_messages`, the newest
    message carries a second, moving breakpoint once the whole prompt is.
    """
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": [{"role": m["role"], "content": m["content"]} for m in request.messages],
    }
    least = min_cacheable_tokens(model)
    if request.system:
        block: dict[str, Any] = {"type": "text", "text": request.system}
        if request.cache_system and prefix_tokens(len(request.system)) >= least:
            block["cache_control"] = dict(CACHE_MARK)
        params["system"] = [block]
    messages = params["messages"]
    if request.cache_messages and messages and isinstance(messages[-1]["content"], str):
        total = len(request.system) + sum(len(str(m["content"])) for m in messages)
        if prefix_tokens(total) >= least:
            messages[-1] = {"role": messages[-1]["role"], "content": [
                {"type": "text", "text": messages[-1]["content"],
                 "cache_control": dict(CACHE_MARK)}]}
    if request.thinking:
        budget = request.thinking_budget or max(MIN_THINKING_BUDGET, request.max_tokens // 2)
        budget = max(budget, MIN_THINKING_BUDGET)
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        # The budget counts toward max_tokens and must stay below it.
        params["max_tokens"] = max(request.max_tokens, budget + MIN_THINKING_BUDGET)
    elif request.temperature is not None:
        # Through extra_body: recent SDKs dropped the keyword; the API still reads it.
        params["extra_body"] = {"temperature": request.temperature}
    return params


class AnthropicClient:
    """A ModelClient for the Anthropic Messages API."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        sdk: str = "auto",
    ) -> None:
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self._auth_token = auth_token
        self._timeout = timeout
        self._sdk = LazyPool(self._make_sdk)
        self._http = LazyPool(lambda: make_http(self._timeout))
        self.sdk_mode = sdk
        """`auto`: plain httpx until the SDK has loaded in the background; `always`: the
        SDK from the first request; `never`: plain httpx only (tests of that path)."""

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"

    def _make_sdk(self) -> Any:
        import anthropic

        return anthropic.Anthropic(
            api_key=self._api_key,
            auth_token=self._auth_token if self._api_key is None else None,
            base_url=self.base_url,
            max_retries=0,
            timeout=self._timeout,
        )

    def _client(self) -> Any:
        """The SDK client, created (and the SDK imported) on first use."""
        return self._sdk.get()

    def close(self) -> None:
        """Release the connection pools."""
        self._sdk.close()
        self._http.close()

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        """Send `request` and yield its events; raises ProviderError on any failure."""
        model = request.model or self.model
        label = f"anthropic {model}"
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        # The SDK warns (attributed to this module, so hidden by Python's default
        # filters) about deprecated models; keep that true under warnings-as-errors.
        if self.sdk_mode == "never" or (self.sdk_mode == "auto" and not sdk_ready()):
            yield from self._stream_http(request, model, label, cancel)
            return
        warnings.filterwarnings(
            "ignore", _SDK_NOTICES, DeprecationWarning, r"normalize\.providers\.anthropic"
        )
        try:
            params = build_params(request, model)
            sdk = self._client()
            raw = await_response(lambda: sdk.messages.create(**params, stream=True), cancel,
                                 lambda late: late.close())
        except TurnCancelledError:
            raise
        except Exception as err:
            raise _map_error(err, label, cancel) from err
        unregister = None
        if cancel is not None:
            unregister = cancel.on_cancel(lambda: abort_response(raw.response))
        try:
            yield from _events(raw, label, model, cancel)
        except ProviderError:
            raise
        except Exception as err:
            raise _map_error(err, label, cancel) from err
        finally:
            if unregister is not None:
                unregister()
            raw.close()


    def _stream_http(self, request: ModelRequest, model: str, label: str,
                     cancel: CancelToken | None) -> Iterator[ModelEvent]:
        """The request over httpx; once the reply starts, the SDK loads in the background."""
        events = stream_messages(self._http.get(), build_params(request, model),
                                 base_url=self.base_url, api_key=self._api_key,
                                 auth_token=self._auth_token, label=label, model=model,
                                 cancel=cancel)
        for event in events:
            prefetch_import()  # the model is answering: time to load the SDK off the path
            yield event


def _events(raw: Any, label: str, model: str, cancel: CancelToken | None) -> Iterator[ModelEvent]:
    """Translate the SDK's raw stream events; fail when `message_stop` never comes."""
    text: list[str] = []
    thinking: list[str] = []
    usage = UsageReport()
    stop_reason = ""
    for event in raw:
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        kind = getattr(event, "type", "")
        if kind == "message_start":
            usage = _merge_usage(usage, event.message.usage)
            yield usage
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                text.append(delta.text)
                yield TextDelta(delta.text)
            elif delta.type == "thinking_delta" and delta.thinking:
                thinking.append(delta.thinking)
                yield ThinkingDelta(delta.thinking)
        elif kind == "message_delta":
            stop_reason = event.delta.stop_reason or stop_reason
            usage = _merge_usage(usage, event.usage)
            yield usage
        elif kind == "message_stop":
            yield Completed(
                text="".join(text),
                thinking="".join(thinking),
                stop_reason=stop_reason or "end_turn",
                usage=usage,
                model=model,
                provider="anthropic",
            )
            return
    partial = "".join(text)
    raise IncompleteStreamError(
        f"{label}: the stream ended before message_stop ({len(partial)} characters received)",
        partial=partial,
    )


def _merge_usage(usage: UsageReport, new: Any) -> UsageReport:
    """Fold an SDK usage object into `usage`; the API's counts are cumulative."""

    def pick(name: str, old: int) -> int:
        value = getattr(new, name, None)
        return old if value is None else int(value)

    return UsageReport(
        input_tokens=pick("input_tokens", usage.input_tokens),
        output_tokens=pick("output_tokens", usage.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", usage.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", usage.cache_write_tokens),
    )


def _map_error(err: Exception, label: str, cancel: CancelToken | None) -> ProviderError:
    """Turn an SDK or transport exception into a one-line ProviderError."""
    if cancel is not None and cancel.cancelled:
        return TurnCancelledError()
    if isinstance(err, ProviderError):
        return err
    import anthropic

    if isinstance(err, anthropic.APIStatusError):
        error_type = getattr(err, "type", None) or ""
        detail = getattr(err, "api_message", None) or err.message
        if err.status_code < 400:
            # An `error` event inside a 200 stream: judge it by its type.
            return ProviderStatusError(
                one_line(f"{label}: {error_type or 'error'} during the stream: {detail}"),
                retryable=error_type in RETRYABLE_ERROR_TYPES or not error_type,
            )
        detail = f"{error_type}: {detail}" if error_type else str(detail)
        return status_error(
            label, err.status_code, detail, retry_after=headers_retry_after(err.response.headers)
        )
    if isinstance(err, anthropic.APITimeoutError):
        return ProviderError(f"{label}: the request timed out", retryable=True)
    if isinstance(err, anthropic.APIConnectionError):
        cause = err.__cause__ or err
        return ProviderError(one_line(f"{label}: connection failed: {cause}"), retryable=True)
    if is_transport_error(err):
        return ProviderError(one_line(f"{label}: connection lost: {err}"), retryable=True)
    if isinstance(err, anthropic.AnthropicError):
        return ProviderError(one_line(f"{label}: {err}"))
    raise err


def create(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> AnthropicClient:
    """Provider factory: an AnthropicClient from `env` (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)."""
    environ = os.environ if env is None else env
    api_key = opts.pop("api_key", None) or environ.get("ANTHROPIC_API_KEY") or None
    auth_token = None if api_key else environ.get("ANTHROPIC_AUTH_TOKEN") or None
    if not api_key and not auth_token:
        raise MissingKeyError(MISSING_KEY)
    return AnthropicClient(
        model,
        api_key=api_key,
        auth_token=auth_token,
        base_url=base_url or environ.get("ANTHROPIC_BASE_URL") or None,
        timeout=float(opts.pop("timeout", DEFAULT_TIMEOUT)),
        sdk=str(opts.pop("sdk", "auto")),
    )
