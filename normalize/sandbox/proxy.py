"""The forward proxy behind `network = [hosts]`: `CONNECT` for https, absolute URIs for http.

One proxy serves one program. It accepts on a listening socket the confined
child made on the loopback of its own network namespace and passed back (see
`normalize.sandbox.confinement`), so the program reaches nothing but this proxy,
and the proxy, in normalize's own namespace, reaches only the listed hosts.
Every host asked for is logged once, allowed or refused; the action's result
carries the log into the journal.

Every proxy of normalize's process is served by one event loop in one thread
(`normalize-proxy`, running while any proxy serves), with a few threads for
name lookups: a program that opens thousands of connections costs sockets,
never threads. What a program may hold is bounded (`ProxyLimits`): connections
open at once, for it and for all programs together (one over either is
answered 503 and closed, and the log says how many were); the time to send
a request's head, whole; and how long a connection may carry nothing either
way. Cuts by a time limit are logged too.

Names resolve through the resolver: the system's, unless normalize's own
process set another with `set_resolver` (a test pinning `allowed.test` to a
loopback server, an embedder with its own DNS). Nothing a program does can
set it: programs share neither normalize's memory nor its environment.

A plain-http request is sent on with `Connection: close`, so one connection
carries one request to the host that was checked; whatever else the client
writes on it goes to that same host.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from normalize.sandbox.hosts import host_matches, normal_host

__all__ = ["LIMITS", "Proxy", "ProxyLimits", "Resolver", "set_resolver"]

Resolver = Callable[[str, int], tuple[str, int]]
"""(host, port) asked for → (address, port) to connect to."""

HEAD_LIMIT = 64 * 1024
LOOKUP_THREADS = 4
BACKLOG = 1024
"""Connections the kernel queues until the loop accepts them: at the default (100), a
burst on a busy machine overflows it, and each connection dropped waits a second for its
SYN to be sent again."""
_CHUNK = 65536
_HOP_BY_HOP = frozenset({b"proxy-connection", b"proxy-authorization", b"connection",
                         b"keep-alive"})
_REASONS = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(frozen=True)
class ProxyLimits:
    """What one program may hold of the proxy, and all programs together."""

    per_program: int = 64
    """Connections one program may have open at once (pip opens 10, npm 15 per host)."""
    total: int = 256
    """Connections all programs of this process may have open at once (two sockets each)."""
    head: float = 10.0
    """Seconds to send a whole request head (a byte now and then does not stretch it)."""
    idle: float = 300.0
    """Seconds a connection may carry nothing either way before it is cut."""
    connect: float = 10.0
    """Seconds to reach the host."""


LIMITS = ProxyLimits()


def _system(host: str, port: int) -> tuple[str, int]:
    return host, port  # open_connection asks the system's resolver


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


class _Idle(Exception):
    pass


@dataclass(frozen=True)
class _Request:
    method: str
    host: str
    port: int
    head: bytes  # what goes upstream first (nothing for CONNECT)


class _Loop:
    """The event loop every proxy of this process shares, in one thread, while one serves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.users = 0
        self.open = 0  # connections open through every proxy (touched in the loop only)

    def acquire(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                loop.set_default_executor(ThreadPoolExecutor(
                    LOOKUP_THREADS, thread_name_prefix="normalize-proxy-lookup"))
                self.thread = threading.Thread(target=_run, args=(loop,),
                                               name="normalize-proxy", daemon=True)
                self.thread.start()
                self.loop = loop
            self.users += 1
            return self.loop

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users or self.loop is None or self.thread is None:
                return
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


def _run(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


_SHARED = _Loop()


class Proxy:
    """A forward proxy to `hosts` only; `serve` a listener, `close` when the program ended."""

    def __init__(self, hosts: Sequence[str], limits: ProxyLimits | None = None) -> None:
        self.hosts = tuple(hosts)
        self.limits = limits or LIMITS
        self._lock = threading.Lock()
        self._log: dict[str, bool] = {}
        self._cut: dict[str, int] = {}  # why → how many connections
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._open = 0
        self._closed = False

    def serve(self, listener: socket.socket) -> None:
        """Accept the program's connections on `listener` (this proxy owns it from now)."""
        loop = _SHARED.acquire()  # (never under this proxy's lock: the loop's thread takes it)
        with self._lock:
            taken = self._closed or self._loop is not None
            if not taken:
                self._loop = loop
        if taken:
            listener.close()
            _SHARED.release()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._start(listener), loop).result()
        except BaseException:
            listener.close()
            raise

    def log(self) -> list[dict[str, object]]:
        """Each host asked for, in order, with whether it was allowed; then the connections
        refused or cut for a limit, how many for each."""
        with self._lock:
            hosts: list[dict[str, object]] = [{"host": host, "allowed": allowed}
                                              for host, allowed in self._log.items()]
            return hosts + [{"limit": why, "connections": count}
                            for why, count in self._cut.items()]

    def close(self) -> None:
        """Stop accepting, cut every connection and wait until none is left (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop = self._loop
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result()
        finally:
            _SHARED.release()

    async def _start(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        self._server = await asyncio.start_server(self._handle, sock=listener, limit=HEAD_LIMIT,
                                                  backlog=BACKLOG)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _note(self, why: str) -> None:
        with self._lock:
            self._cut[why] = self._cut.get(why, 0) + 1

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or self._closed:
            writer.transport.abort()
            return
        self._tasks.add(task)
        try:
            refusal = self._over()
            if refusal:
                self._note(refusal)
                await _reply(writer, 503, f"normalize: {refusal}")
                return
            self._open += 1
            _SHARED.open += 1
            try:
                await self._serve_one(reader, writer)
            finally:
                self._open -= 1
                _SHARED.open -= 1
        finally:
            self._tasks.discard(task)

    def _over(self) -> str:
        """Why one more connection is refused (a cap is reached), or ""."""
        limits = self.limits
        if self._open >= limits.per_program:
            return f"refused: over the {limits.per_program} connections a program may have open"
        if _SHARED.open >= limits.total:
            return f"refused: over the {limits.total} connections all programs may have open"
        return ""

    async def _serve_one(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        clean = False
        try:
            request = _parse(await self._head(reader))
            allowed = host_matches(request.host, self.hosts)
            with self._lock:
                self._log.setdefault(request.host, allowed)
            if not allowed:
                raise _Refused(403, f"normalize: {request.host} is not one of the hosts this "
                                    f"run may reach ({', '.join(self.hosts)})")
            up_reader, upstream = await self._connect(request)
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.write(request.head)
            await self._relay(reader, writer, up_reader, upstream)
            clean = True
        except _Refused as refusal:
            await _reply(writer, refusal.status, str(refusal))
            clean = True
        except _Idle:
            self._note(f"cut: nothing sent either way for {self.limits.idle:g} s")
        except (OSError, EOFError, asyncio.IncompleteReadError):
            pass  # the program or the host went away
        finally:
            for end in (writer, upstream):
                if end is not None:
                    if clean:
                        end.close()
                    else:
                        end.transport.abort()

    async def _head(self, reader: asyncio.StreamReader) -> bytes:
        """The request's head, without its blank line; what follows stays in `reader`."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.head)
        except TimeoutError:
            why = f"cut: no whole request head within {self.limits.head:g} s"
            self._note(why)
            raise _Refused(408, f"normalize: {why}") from None
        except asyncio.LimitOverrunError:
            raise _Refused(431, "normalize: the request's head is too long") from None
        return head[:-4]

    async def _connect(self, request: _Request
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        try:
            address, port = await loop.run_in_executor(None, _resolver, request.host,
                                                       request.port)
            return await asyncio.wait_for(asyncio.open_connection(address, port, limit=_CHUNK),
                                          self.limits.connect)
        except (OSError, ValueError, TimeoutError) as exc:
            raise _Refused(502, f"normalize: cannot reach {request.host}:{request.port} "
                                f"({getattr(exc, 'strerror', None) or exc or 'timed out'})"
                           ) from None

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter,
                     host: asyncio.StreamReader, to_host: asyncio.StreamWriter) -> None:
        """Copy both ways at once until both ends finished, or neither carried anything for
        the idle limit (`_Idle`)."""
        loop = asyncio.get_running_loop()
        last = [loop.time()]
        idle = self.limits.idle

        async def pump(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
            while True:
                left = last[0] + idle - loop.time()
                if left <= 0:
                    raise _Idle
                try:
                    chunk = await asyncio.wait_for(source.read(_CHUNK), left)
                except TimeoutError:
                    continue  # the other way may have carried something meanwhile
                if not chunk:
                    break
                last[0] = loop.time()
                target.write(chunk)
                await target.drain()
                last[0] = loop.time()
            if target.can_write_eof():
                target.write_eof()

        pumps = [asyncio.ensure_future(pump(client, to_host)),
                 asyncio.ensure_future(pump(host, to_client))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for each in pumps:
                each.cancel()
            outcomes = await asyncio.gather(*pumps, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, _Idle | OSError):
                raise outcome


async def _reply(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = (text + "\n").encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/plain; "
            f"charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        writer.write(head.encode() + body)
        await asyncio.wait_for(writer.drain(), 5.0)
    except (OSError, TimeoutError):
        pass
    finally:
        writer.close()


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
