"""A real OTLP/HTTP trace receiver on loopback: decodes `ExportTraceServiceRequest` bodies.

`Receiver` is an `http.server` in a thread. Each POST body is parsed with the
protobuf classes of `opentelemetry-proto` (gzip or deflate undone first) and
its spans kept as plain `Span` records with their resource's attributes, the
path and the request's headers. `wait_for` waits for a condition on what has
arrived, with a deadline. `BlackHole` accepts connections and never answers.
"""

from __future__ import annotations

import errno
import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

trace_service = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    reason="opentelemetry-proto is not installed (.ci/run installs it with the test extra)")


@dataclass
class Span:
    """One received span, decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attrs: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    message: str
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    start: int
    end: int


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def value(any_value: Any) -> Any:
    """A protobuf `AnyValue` as Python."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return None if kind is None else getattr(any_value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[Span]:
    request = trace_service.ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope in resource_spans.scope_spans:
            for s in scope.spans:
                spans.append(Span(
                    name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                    parent_id=s.parent_span_id.hex(), attrs=attributes(s.attributes),
                    status=s.status.code, message=s.status.message,
                    events=[(e.name, attributes(e.attributes)) for e in s.events],
                    resource=resource, start=s.start_time_unix_nano, end=s.end_time_unix_nano))
    return spans


def _handler(received: Received, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            spans = decode(body)
            with lock:
                received.spans += spans
                received.paths.append(self.path)
                received.headers.append({k.lower(): v for k, v in self.headers.items()})
            reply = trace_service.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    return Handler


class Receiver:
    """The receiver's address and what it has received so far."""

    def __init__(self, server: ThreadingHTTPServer, received: Received,
                 lock: threading.Lock) -> None:
        self.server = server
        self._received = received
        self._lock = lock

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._received.spans)

    def paths(self) -> list[str]:
        with self._lock:
            return list(self._received.paths)

    def headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self._received.headers)

    def wait_for(self, ready: Callable[[list[Span]], bool], what: str,
                 timeout: float = 30.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if ready(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout}s; got "
                                     f"{[s.name for s in spans]}")
            time.sleep(0.02)


@contextmanager
def receiver(port: int = 0) -> Iterator[Receiver]:
    """A receiver on a free port, or on `port` (waited for while another test holds it)."""
    received, lock = Received(), threading.Lock()
    server = _bound(port, _handler(received, lock))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(server, received, lock)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _bound(port: int, handler: type[BaseHTTPRequestHandler],
           timeout: float = 120.0) -> ThreadingHTTPServer:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@contextmanager
def black_hole() -> Iterator[str]:
    """A loopback URL whose connections are accepted by the kernel and never answered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()
