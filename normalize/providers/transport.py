"""Helpers for the HTTP layer under the providers, without importing it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2"})
_TRANSPORT_BASES = frozenset(
    {"TransportError", "NetworkError", "ProtocolError", "TimeoutException"}
)


def is_transport_error(err: BaseException) -> bool:
    """Whether `err` is a network failure (from httpx/httpcore or the OS), worth retrying."""
    if isinstance(err, OSError):
        return True
    return any(
        cls.__module__.split(".")[0] in _TRANSPORT_MODULES and cls.__name__ in _TRANSPORT_BASES
        for cls in type(err).__mro__
    )


def abort_response(response: Any) -> None:
    """Stop a streaming response from another thread, waking a blocked read.

    Closing a socket does not wake a thread blocked in `recv` on Linux;
    shutting it down does, so the socket under the response is shut down
    first (best effort), then the response is closed.
    """
    try:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # best effort; close() below still runs
        pass
    try:
        response.close()
    except Exception:
        pass


class LazyPool:
    """A provider's connection pool: made on first use (its library imported only then),
    shared by the client's threads, released by `close`."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._pool: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._pool is None:
                self._pool = self._make()
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def stream_lines(http: Any, sent: Any, cancel: Any,
                 failure: Callable[[Any], Exception]) -> Iterator[str]:
    """Send the built request `sent` streamed and yield its response's lines.

    Until the headers arrive the request waits in a thread (`await_response`),
    so Ctrl-C is not held up by a slow server; afterwards a cancel aborts the
    response. A status of 400 or more raises `failure(response)`.
    """
    from normalize.providers.base import await_response

    response = await_response(lambda: http.send(sent, stream=True), cancel,
                              lambda late: late.close())
    try:
        if response.status_code >= 400:
            response.read()
            raise failure(response)
        unregister = None if cancel is None else \
            cancel.on_cancel(lambda: abort_response(response))
        try:
            yield from response.iter_lines()
        finally:
            if unregister is not None:
                unregister()
    finally:
        response.close()


def loopback_address(base_url: str) -> tuple[str, int] | None:
    """(host, port) of a base URL on this machine (localhost, 127.x, ::1), else None."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if host not in ("localhost", "::1", "0.0.0.0") and not host.startswith("127."):
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return host, port or (443 if parts.scheme == "https" else 80)


def refused(err: BaseException) -> bool:
    """Whether a connection failure (or one in its chain of causes) was a refusal."""
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def nothing_listens(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a TCP connection to host:port on this machine is refused (a server not started)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # slow or odd: let the request say what it is
