"""The forward proxy behind `network = [hosts]`: `CONNECT` for https, absolute URIs for http.

One proxy serves one program. It accepts on a listening socket the confined
child made on the loopback of its own network namespace and passed back (see
`normalize.sandbox.confinement`), so the program reaches nothing but this proxy,
and the proxy, in normalize's own namespace, reaches only the listed hosts.
Every host asked for is logged once, allowed or refused; the action's result
carries the log into the journal.

Names resolve through the resolver: the system's, unless normalize's own
process set another with `set_resolver` (a test pinning `allowed.test` to a
loopback server, an embedder with its own DNS). Nothing a program does can
set it: programs share neither normalize's memory nor its environment.

A plain-http request is sent on with `Connection: close`, so one connection
carries one request to the host that was checked; whatever else the client
writes on it goes to that same host.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from normalize.sandbox.hosts import host_matches, normal_host

__all__ = ["Proxy", "Resolver", "set_resolver"]

Resolver = Callable[[str, int], tuple[str, int]]
"""(host, port) asked for → (address, port) to connect to."""

HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
_CHUNK = 65536
_HOP_BY_HOP = frozenset({b"proxy-connection", b"proxy-authorization", b"connection",
                         b"keep-alive"})
_REASONS = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
            502: "Bad Gateway"}


def _system(host: str, port: int) -> tuple[str, int]:
    return host, port  # create_connection asks the system's resolver


_resolver: Resolver = _system


def set_resolver(resolver: Resolver | None) -> Resolver:
    """Resolve the proxies' names with `resolver` (None: the system's); returns the previous."""
    global _resolver
    previous, _resolver = _resolver, resolver or _system
    return previous


class _Refused(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


@dataclass(frozen=True)
class _Request:
    method: str
    host: str
    port: int
    head: bytes  # what goes upstream first (nothing for CONNECT)


class Proxy:
    """A forward proxy to `hosts` only; `serve` a listener, `close` when the program ended."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.hosts = tuple(hosts)
        self._lock = threading.Lock()
        self._log: dict[str, bool] = {}
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener: socket.socket | None = None

    def serve(self, listener: socket.socket) -> None:
        """Accept the program's connections on `listener` (this proxy owns it from now)."""
        self._listener = listener
        if not self._start(self._accept, listener):
            listener.close()

    def log(self) -> list[dict[str, object]]:
        """Each host asked for, in order, with whether it was allowed."""
        with self._lock:
            return [{"host": host, "allowed": allowed} for host, allowed in self._log.items()]

    def close(self) -> None:
        """Cut every connection, stop accepting and wait for every thread of this proxy."""
        with self._lock:
            self._closed = True
            for sock in [*self._sockets, *([self._listener] if self._listener else [])]:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()
        if self._listener is not None:
            self._listener.close()

    def _start(self, target: Callable[..., None], *args: socket.socket) -> bool:
        return self._adopt(threading.Thread(target=target, args=args, name="normalize-proxy",
                                            daemon=True))

    def _adopt(self, thread: threading.Thread) -> bool:
        """Start `thread` as one of this proxy's (joined by `close`); False once closed."""
        with self._lock:
            if self._closed:
                return False
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()
        return True

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if not self._closed:
                self._sockets.add(sock)
            return not self._closed

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # shut down by `close`
            if not self._track(conn) or not self._start(self._handle, conn):
                self._drop(conn)
                return

    def _handle(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(conn)
            request = _parse(head)
            allowed = host_matches(request.host, self.hosts)
            with self._lock:
                self._log.setdefault(request.host, allowed)
            if not allowed:
                raise _Refused(403, f"normalize: {request.host} is not one of the hosts this "
                                    f"run may reach ({', '.join(self.hosts)})")
            upstream = self._connect(request)
            if request.method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(request.head + rest)
            _relay(conn, upstream, self._adopt)
        except _Refused as refusal:
            _reply(conn, refusal.status, str(refusal))
        except OSError:
            pass  # the program or the host went away, or `close` cut the connection
        finally:
            self._drop(conn)
            if upstream is not None:
                self._drop(upstream)

    def _connect(self, request: _Request) -> socket.socket:
        try:
            address = _resolver(request.host, request.port)
            upstream = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
        except (OSError, ValueError) as exc:
            raise _Refused(502, f"normalize: cannot reach {request.host}:{request.port} "
                                f"({getattr(exc, 'strerror', None) or exc})") from None
        upstream.settimeout(None)
        if not self._track(upstream):
            upstream.close()
            raise OSError("the proxy was closed")
        return upstream


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """The request's head (through the blank line) and whatever the client sent after it."""
    conn.settimeout(HEAD_TIMEOUT)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise _Refused(431, "normalize: the request's head is too long")
        chunk = conn.recv(_CHUNK)
        if not chunk:
            raise OSError("the client closed before a request")
        data += chunk
    conn.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _authority(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise _Refused(400, f"normalize: CONNECT needs HOST:PORT, not {target!r}")
    return normal_host(host), int(port)


def _parse(head: bytes) -> _Request:
    """The request line checked and, for plain http, the head rewritten for the origin."""
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _Refused(400, "normalize: not an HTTP request")
    method, target, version = parts
    if method == "CONNECT":
        host, port = _authority(target)
        return _Request(method, host, port, b"")
    url = urlsplit(target)
    try:
        port = url.port or 80
    except ValueError:
        port = 0
    if url.scheme != "http" or not url.hostname or not port:
        raise _Refused(400, "normalize's proxy takes CONNECT HOST:PORT (https) and absolute "
                            "http:// URLs")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [line for line in lines[1:]
            if line and line.split(b":", 1)[0].strip().lower() not in _HOP_BY_HOP]
    out = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *kept,
                        b"Connection: close"])
    return _Request(method, normal_host(url.hostname), port, out + b"\r\n\r\n")


def _reply(conn: socket.socket, status: int, text: str) -> None:
    body = (text + "\n").encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/plain; "
            f"charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        conn.sendall(head.encode() + body)
    except OSError:
        pass


def _relay(client: socket.socket, upstream: socket.socket,
           adopt: Callable[[threading.Thread], bool]) -> None:
    """Copy both ways, one thread a direction (neither waits on the other), until both end."""
    back = threading.Thread(target=_pump, args=(upstream, client), name="normalize-proxy",
                            daemon=True)
    if not adopt(back):
        return
    _pump(client, upstream)
    back.join()


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until it ends, then end `target`'s sending side."""
    try:
        while chunk := source.recv(_CHUNK):
            target.sendall(chunk)
    except OSError:
        pass  # reset, or cut by `close`
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass
