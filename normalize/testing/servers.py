"""A local fake model server speaking the real Anthropic and OpenAI streaming protocols.

The only fake normalize allows in tests is the model, and only at the HTTP
boundary: the real SDK and httpx clients talk to this server through a base
URL. Each test scripts a queue of responses, reply texts or faults:

    with FakeModelServer(["Hello!"], models={"claude-haiku-4-5": ["from haiku"]}) as server:
        server.add(Fault.status(529), "second try works")
        client = create_client("anthropic:claude-sonnet-4-5", base_url=server.url,
                               env={"ANTHROPIC_API_KEY": "test"})
        ...
        assert server.requests[-1].model == "claude-sonnet-4-5"

`POST /v1/messages` answers as the Anthropic Messages API (SSE events from
`message_start` to `message_stop`); `POST /v1/chat/completions` as OpenAI's
chat completions (`data:` chunks ending with `[DONE]`); `POST /v1/responses` as
OpenAI's Responses API; `POST /v1beta/models/MODEL:streamGenerateContent` (and
`:generateContent`, `:countTokens`) as Google's Gemini API (`data:` chunks, each a
`GenerateContentResponse`; `normalize.testing.gemini`). Streams use chunked
transfer encoding, so a cut stream can end cleanly (the body is complete but
the final event is missing) or abruptly (the connection drops mid-body).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from normalize.providers.anthropic import min_cacheable_tokens
from normalize.providers.synthetic import estimate_tokens
from normalize.testing.responses import as_chat, stream_response

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Reply:
    """A successful streamed reply; `delay` waits before answering, `chunk_delay` between chunks.

    `wait_for` holds the answer until the event is set (at most 30 s), so a test
    can act while the request is in flight.
    """

    text: str
    thinking: str = ""
    stop_reason: str = "end_turn"
    usage: Mapping[str, int] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    wait_for: threading.Event | None = None
    tools: tuple[ToolUse, ...] = ()
    """Tool calls after the text (Anthropic `tool_use` blocks; Responses `function_call`s)."""


@dataclass(frozen=True)
class ToolUse:
    """A tool call in a reply: the tool's name and its input (a harness runs it).

    Text input is a call of a freeform tool (the Responses API's `custom_tool_call`: Codex's
    `apply_patch`); only the Responses API serves it.
    """

    name: str
    input: Mapping[str, Any] | str
    id: str = field(default_factory=lambda: "toolu_fake_" + secrets.token_hex(8))


@dataclass(frozen=True)
class Fault:
    """A failure to play instead of a reply; build one with the class methods."""

    kind: Literal["status", "cut", "error_event", "stall"]
    code: int = 200
    retry_after: str | None = None
    after_text: str = ""
    abrupt: bool = False
    error_type: str = ""
    message: str = ""
    seconds: float = 0.0

    @classmethod
    def status(
        cls,
        code: int,
        *,
        retry_after: float | str | None = None,
        error_type: str | None = None,
        message: str | None = None,
    ) -> Fault:
        """An HTTP error response (e.g. 529, 429 with `retry-after`, 500, 401)."""
        return cls(
            kind="status",
            code=code,
            retry_after=None if retry_after is None else _header_value(retry_after),
            error_type=error_type or ANTHROPIC_ERROR_TYPES.get(code, "api_error"),
            message=message or f"fake error {code}",
        )

    @classmethod
    def cut_stream(cls, after_text: str = "", *, abrupt: bool = False) -> Fault:
        """Stream `after_text`, then stop without the final event and close the connection.

        By default the HTTP body ends cleanly (the SDK sees no error at all);
        `abrupt=True` drops the connection in the middle of the chunked body.
        """
        return cls(kind="cut", after_text=after_text, abrupt=abrupt)

    @classmethod
    def error_event(
        cls,
        after_text: str = "",
        *,
        error_type: str = "overloaded_error",
        message: str = "Overloaded",
    ) -> Fault:
        """Stream `after_text`, then an SSE `error` event, then end the stream."""
        return cls(
            kind="error_event", after_text=after_text, error_type=error_type, message=message
        )

    @classmethod
    def stall(cls, after_text: str = "", *, seconds: float = 30.0) -> Fault:
        """Stream `after_text`, then send nothing for `seconds` (or until the server closes)."""
        return cls(kind="stall", after_text=after_text, seconds=seconds)


Item = str | Reply | Fault


def _header_value(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass
class RecordedRequest:
    """One request the server received."""

    api: Literal["anthropic", "openai", "responses", "gemini", "unknown"]
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.perf_counter)

    @property
    def model(self) -> str:
        if self.api == "gemini":  # named in the path: /v1beta/models/MODEL:METHOD
            return self.path.rsplit("/models/", 1)[-1].split(":", 1)[0]
        return str(self.body.get("model", ""))

    @property
    def system(self) -> Any:
        """The system prompt as sent: Anthropic's `system` field, or OpenAI's system message."""
        if self.api == "openai":
            for message in self.body.get("messages", []):
                if message.get("role") == "system":
                    return message.get("content")
            return None
        return self.body.get("system")

    @property
    def last_message(self) -> str:
        messages = self.body.get("messages") or [{}]
        return str(messages[-1].get("content", ""))


class FakeModelServer:
    """A scripted Anthropic/OpenAI streaming server on 127.0.0.1, in a background thread."""

    def __init__(
        self,
        replies: Iterable[Item] = (),
        *,
        models: Mapping[str, Iterable[Item]] | None = None,
        chunk_size: int = 12,
    ) -> None:
        self.chunk_size = chunk_size
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self._queues: dict[str | None, deque[Item]] = {None: deque(replies)}
        for model, items in (models or {}).items():
            self._queues[model] = deque(items)
        self._lock = threading.Lock()
        self._cached: set[str] = set()  # Anthropic prompt-cache entries (prefix digests)
        self._prompts: dict[tuple[str, str], list[str]] = {}  # OpenAI prompts seen, by key
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # life cycle

    def start(self) -> FakeModelServer:
        """Bind a free port and serve in a daemon thread."""
        if self._httpd is None:
            self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fake-model-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; stalled streams are released."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The base URL for the Anthropic SDK (`base_url=server.url`)."""
        if self._httpd is None:
            raise RuntimeError("the fake server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The base URL for OpenAI-compatible clients (ends in `/v1`)."""
        return f"{self.url}/v1"

    # script

    def add(self, *items: Item, model: str | None = None) -> None:
        """Queue responses; with `model`, only for requests naming that model."""
        with self._lock:
            self._queues.setdefault(model, deque()).extend(items)

    def pending(self, model: str | None = None) -> int:
        """Responses still queued (for `model`, or the shared queue)."""
        with self._lock:
            return len(self._queues.get(model, ()))

    def assert_done(self) -> None:
        """Fail when responses are left over or a request found none."""
        with self._lock:
            left = {k or "*": len(q) for k, q in self._queues.items() if q}
        if left or self.unexpected:
            raise AssertionError(
                f"fake model server: unplayed responses {left}, "
                f"{len(self.unexpected)} request(s) without a scripted response"
            )

    @property
    def first_request_at(self) -> float | None:
        """`time.perf_counter()` when the first request arrived, or None."""
        return self.requests[0].at if self.requests else None

    def _take(self, model: str) -> Item | None:
        with self._lock:
            queue = self._queues.get(model) if model in self._queues else self._queues[None]
            return queue.popleft() if queue else None

    def anthropic_usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """Input, cache-read and cache-write tokens of a Messages request, as the API counts them.

        The prompt is a sequence of blocks (system blocks, then each message's
        content). A block marked `cache_control` is a breakpoint: the prefix up
        to the longest earlier-written boundary found within 20 blocks before a
        breakpoint is read from the cache, and each breakpoint whose prefix is at
        least the model's minimum cacheable length is written.
        """
        blocks = _anthropic_blocks(body)
        keys, totals = _prefixes(str(body.get("model", "")), blocks)
        total = totals[-1] if totals else 0
        marks = [i for i, (_, _, marked) in enumerate(blocks) if marked]
        least = min_cacheable_tokens(str(body.get("model", "")))
        read_at = -1
        with self._lock:
            for mark in marks:
                for i in range(mark, max(mark - CACHE_LOOKBACK, -1), -1):
                    if keys[i] in self._cached:
                        read_at = max(read_at, i)
                        break
            read = totals[read_at] if read_at >= 0 else 0
            written = [m for m in marks if totals[m] >= least and m > read_at]
            for mark in written:
                self._cached.add(keys[mark])
        write = totals[written[-1]] - read if written else 0
        return {"input_tokens": total - read - write, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write}

    def openai_usage(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of a chat request, as OpenAI's automatic caching counts.

        A prompt of at least 1,024 tokens reads the longest prefix it shares with
        an earlier prompt of the same model and `prompt_cache_key`, in steps of
        128 tokens from 1,024 on.
        """
        text = "".join(f"<{m.get('role')}>{_content_text(m.get('content'))}"
                       for m in body.get("messages") or [] if isinstance(m, Mapping))
        prompt = estimate_tokens(text)
        key = (str(body.get("model", "")), str(body.get("prompt_cache_key") or ""))
        with self._lock:
            earlier = self._prompts.setdefault(key, [])
            shared = max((_common_prefix(text, other) for other in earlier), default=0)
            earlier.append(text)
        cached = estimate_tokens(text[:shared]) if prompt >= OPENAI_MIN_CACHED else 0
        cached = cached - (cached % 128) if cached >= OPENAI_MIN_CACHED else 0
        return prompt, min(cached, prompt)


CACHE_LOOKBACK = 20
"""Blocks before a breakpoint the Anthropic API checks for an earlier cache entry."""
OPENAI_MIN_CACHED = 1024


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return str(content or "")


def _anthropic_blocks(body: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """(role, text, marked) for each block of a Messages request, system first."""
    out: list[tuple[str, str, bool]] = []
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(("system", system, False))
    elif isinstance(system, list):
        out += [("system", str(b.get("text", "")), bool(b.get("cache_control")))
                for b in system if isinstance(b, Mapping)]
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role, content = str(message.get("role", "")), message.get("content")
        if isinstance(content, list):
            out += [(role, str(b.get("text", "")), bool(b.get("cache_control")))
                    for b in content if isinstance(b, Mapping)]
        else:
            out.append((role, str(content or ""), False))
    return out


def _prefixes(model: str, blocks: list[tuple[str, str, bool]]) -> tuple[list[str], list[int]]:
    """A digest of each prefix of `blocks` (ending at block i) and its tokens so far."""
    digest = hashlib.blake2b(model.encode(), digest_size=16)
    keys: list[str] = []
    totals: list[int] = []
    tokens = 0
    for role, text, _ in blocks:
        digest.update(json.dumps([role, text]).encode())
        keys.append(digest.copy().hexdigest())
        tokens += estimate_tokens(text)
        totals.append(tokens)
    return keys, totals


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over slices: C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[_Handler], fake: FakeModelServer
    ) -> None:
        super().__init__(address, handler)
        self.fake = fake

    def handle_error(self, _request: Any, _client_address: Any) -> None:
        err = sys.exc_info()[1]
        if err is not None and not isinstance(err, ConnectionError | TimeoutError):
            self.fake.errors.append(err)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read `FakeModelServer.requests` instead."""

    # plumbing

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.send_header("request-id", "req_fake_" + secrets.token_hex(6))
        self.end_headers()
        self.close_connection = True

    def _chunk(self, data: str) -> None:
        raw = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection in the middle of the chunked body."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _pieces(self, text: str) -> list[str]:
        size = max(1, self.server.fake.chunk_size)
        return [text[i : i + size] for i in range(0, len(text), size)]

    # requests

    def do_POST(self) -> None:
        fake = self.server.fake
        record = self._read()
        with fake._lock:
            fake.requests.append(record)
        if record.api == "unknown":
            self._send_json(404, {"error": {"type": "not_found_error", "message": record.path}})
            return
        if record.path.endswith(":countTokens"):  # Gemini's: no reply of the script's
            self._send_json(200, {"totalTokens": estimate_tokens(json.dumps(record.body))})
            return
        item = self._item(record)
        if isinstance(item, Fault) and item.kind == "status":
            self._status(record.api, item)
        elif not record.body.get("stream") and record.api != "gemini":  # (Gemini: the path)
            self._send_json(400, _error_body(record.api, "invalid_request_error",
                                             "fake server: only streamed requests are served"))
        else:
            self._answer(record, item)

    def _read(self) -> RecordedRequest:
        """The request: its API (by its path), body and headers."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        return RecordedRequest(api=_api_of(path), path=path,
                               body=body if isinstance(body, dict) else {},
                               headers={k.lower(): v for k, v in self.headers.items()})

    def _item(self, record: RecordedRequest) -> Reply | Fault:
        """The scripted answer to `record` (a 400 fault when the script has none left)."""
        fake = self.server.fake
        item = fake._take(record.model)
        if item is None:
            fake.unexpected.append(record)
            item = Fault.status(
                400, message=f"fake server: no scripted response left for model {record.model!r}"
            )
        return Reply(item) if isinstance(item, str) else item

    def _answer(self, record: RecordedRequest, item: Reply | Fault) -> None:
        """Stream `item` in `record`'s API, after the reply's delay or its event."""
        if isinstance(item, Reply) and item.delay:
            self.server.fake._stopping.wait(item.delay)
        if isinstance(item, Reply) and item.wait_for is not None:
            item.wait_for.wait(30.0)
        if record.api == "gemini":
            self._gemini(record, item, stream=record.path.endswith(":streamGenerateContent"))
        elif record.api == "anthropic":
            self._anthropic(record, item)
        elif record.api == "responses":
            self._responses(record, item)
        else:
            self._openai(record, item)

    def _status(self, api: str, fault: Fault) -> None:
        headers = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
        self._send_json(fault.code, _error_body(api, fault.error_type, fault.message), headers)

    def _usage(self, record: RecordedRequest, reply: Reply) -> dict[str, int]:
        """Estimated usage: input from the request text, cache reads and writes as the API's."""
        fake = self.server.fake
        if record.api == "gemini":
            prompt = estimate_tokens(json.dumps(record.body.get("contents") or []))
            usage = {"input_tokens": prompt, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": 0}
        elif record.api in ("openai", "responses"):
            body = as_chat(record.body) if record.api == "responses" else record.body
            prompt, cached = fake.openai_usage(body)
            usage = {"input_tokens": prompt - cached, "cache_read_input_tokens": cached,
                     "cache_creation_input_tokens": 0}
        else:
            usage = fake.anthropic_usage(record.body)
        usage["output_tokens"] = max(1, estimate_tokens(reply.text + reply.thinking))
        usage.update(reply.usage or {})
        return usage

    # Anthropic Messages streaming

    def _event(self, name: str, payload: Mapping[str, Any]) -> None:
        self._chunk(f"event: {name}\ndata: {json.dumps(payload)}\n\n")

    def _anthropic(self, record: RecordedRequest, item: Reply | Fault) -> None:
        reply = item if isinstance(item, Reply) else Reply(item.after_text)
        usage = self._usage(record, reply)
        self._start_stream()
        self._event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake_" + secrets.token_hex(8),
                    "type": "message",
                    "role": "assistant",
                    "model": record.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
        )
        index = 0
        if reply.thinking:
            self._block(index, "thinking", reply.thinking, reply.chunk_delay)
            index += 1
        text = reply.text if isinstance(item, Reply) else item.after_text
        if text or isinstance(item, Reply):
            stopping = self._block(
                index, "text", text, reply.chunk_delay, open_only=isinstance(item, Fault)
            )
            if stopping:
                return
        for call in reply.tools:
            index += 1
            self._tool_block(index, call)
        if isinstance(item, Fault):
            self._fault(
                item,
                lambda: self._event(
                    "error",
                    {"type": "error", "error": {"type": item.error_type, "message": item.message}},
                ),
            )
            return
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if reply.tools else reply.stop_reason,
                          "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        self._event("message_stop", {"type": "message_stop"})
        self._end_stream()

    def _block(
        self, index: int, kind: str, text: str, delay: float, open_only: bool = False
    ) -> bool:
        """Stream one content block; returns True when the server is stopping."""
        start: dict[str, Any] = {"type": kind, kind: ""}
        if kind == "thinking":
            start["signature"] = ""
        self._event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        if index == 0:
            self._event("ping", {"type": "ping"})
        for piece in self._pieces(text):
            if delay and self.server.fake._stopping.wait(delay):
                return True
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": f"{kind}_delta", kind: piece},
                },
            )
        if kind == "thinking":
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": "fake-signature"},
                },
            )
        if not open_only:
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})
        return False

    def _tool_block(self, index: int, call: ToolUse) -> None:
        """Stream one `tool_use` block, its input as JSON in pieces."""
        if isinstance(call.input, str):
            raise ValueError(f"{call.name}: the Messages API has no freeform tools")
        start = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        self._event("content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start})
        for piece in self._pieces(json.dumps(dict(call.input))):
            self._event("content_block_delta", {
                "type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}})
        self._event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _fault(self, fault: Fault, send_error: Any) -> None:
        """Finish a stream the way `fault` says."""
        if fault.kind == "error_event":
            send_error()
            self._end_stream()
        elif fault.kind == "stall":
            self.server.fake._stopping.wait(fault.seconds)
            self._drop()
        elif fault.abrupt:
            self._drop()
        else:
            self._end_stream()

    # OpenAI Responses streaming (normalize.testing.responses)

    def _responses(self, record: RecordedRequest, item: Reply | Fault) -> None:
        reply = item if isinstance(item, Reply) else Reply(item.after_text)
        self._start_stream()
        calls = [(call.id, call.name, call.input) for call in reply.tools]
        stream_response(self._event, self._pieces, record.model, reply.text, calls,
                        self._usage(record, reply))
        self._end_stream()

    # Google's Gemini API (normalize.testing.gemini)

    def _gemini(self, record: RecordedRequest, item: Reply | Fault, *, stream: bool) -> None:
        from normalize.testing.gemini import chunks, whole

        reply = item if isinstance(item, Reply) else Reply(item.after_text)
        usage = self._usage(record, reply)
        calls = [(call.name, call.input) for call in reply.tools]
        if not stream:
            self._send_json(200, whole(record.model, reply.text, calls, usage))
            return
        self._start_stream()
        for chunk in chunks(self._pieces(reply.text), record.model, calls, usage):
            self._chunk(f"data: {json.dumps(chunk)}\r\n\r\n")
        self._end_stream()

    # OpenAI chat-completions streaming

    def _openai(self, record: RecordedRequest, item: Reply | Fault) -> None:
        reply = item if isinstance(item, Reply) else Reply(item.after_text)
        ident = "chatcmpl-fake" + secrets.token_hex(6)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            payload = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": record.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self._chunk(f"data: {json.dumps(payload)}\n\n")

        self._start_stream()
        chunk({"role": "assistant", "content": ""})
        for piece in self._pieces(reply.thinking):
            if reply.chunk_delay and self.server.fake._stopping.wait(reply.chunk_delay):
                return
            chunk({"reasoning_content": piece})
        for piece in self._pieces(reply.text):
            if reply.chunk_delay and self.server.fake._stopping.wait(reply.chunk_delay):
                return
            chunk({"content": piece})
        if isinstance(item, Fault):
            error = {
                "error": {"message": item.message, "type": item.error_type, "code": item.error_type}
            }
            self._fault(item, lambda: self._chunk(f"data: {json.dumps(error)}\n\n"))
            return
        chunk({}, "length" if reply.stop_reason == "max_tokens" else "stop")
        if (record.body.get("stream_options") or {}).get("include_usage"):
            usage = self._usage(record, reply)
            cached = usage["cache_read_input_tokens"]
            prompt = usage["input_tokens"] + cached + usage["cache_creation_input_tokens"]
            self._chunk(
                "data: "
                + json.dumps(
                    {
                        "id": ident,
                        "object": "chat.completion.chunk",
                        "model": record.model,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": usage["output_tokens"],
                            "total_tokens": prompt + usage["output_tokens"],
                            "prompt_tokens_details": {"cached_tokens": cached},
                        },
                    }
                )
                + "\n\n"
            )
        self._chunk("data: [DONE]\n\n")
        self._end_stream()


Api = Literal["anthropic", "openai", "responses", "gemini", "unknown"]
APIS: tuple[tuple[str, Api], ...] = (("/messages", "anthropic"),
                                     ("/chat/completions", "openai"),
                                     ("/responses", "responses"))
"""How a request's path ends → the API it speaks (Gemini's: `/models/MODEL:METHOD`)."""


def _api_of(path: str) -> Api:
    for ending, api in APIS:
        if path.endswith(ending):
            return api
    return "gemini" if "/models/" in path and ":" in path.rsplit("/", 1)[-1] else "unknown"


def _error_body(api: str, error_type: str, message: str) -> dict[str, Any]:
    if api in ("openai", "responses"):
        return {
            "error": {"message": message, "type": error_type, "param": None, "code": error_type}
        }
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_fake_" + secrets.token_hex(6),
    }
