"""The MCP servers of one run: started on first use, called synchronously, stopped at the end.

`McpSessions` owns one background thread with its own asyncio event loop; each
server's `ClientSession` (the official SDK) lives in a task on that loop, and
the engine's threads call into it with `run_coroutine_threadsafe` and a
timeout. A stdio server is a program normalize starts, so it runs under the
run's sandbox (`transport.sandboxed_stdio`). Failures become `McpError`s the
model can act on: an unknown server or tool names what exists, a server that
cannot start gives its command and the tail of its stderr, a hang gives the
timeout, a death mid-call says so (and the server starts afresh next time).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from normalize.cancel import CancelToken
from normalize.errors import ToolError
from normalize.mcp.catalog import RemoteTool
from normalize.mcp.config import ServerSpec
from normalize.mcp.transport import Spawned, kill_group
from normalize.sandbox import SandboxMode, SandboxPolicy, SandboxTier, confine, probe

__all__ = ["CallResult", "McpError", "McpSessions"]

T = TypeVar("T")
_STDERR_TAIL = 1200
_POLL = 0.1


class McpError(ToolError):
    """An MCP server or call failed; the message says what to do about it."""


class _Broken(McpError):
    """The server died or hung: it is stopped, and the next use starts a fresh one."""


def _timed_out(spec: ServerSpec, tool: str) -> _Broken:
    return _Broken(f"MCP server {spec.name!r} did not answer {tool} within {spec.timeout:g} s "
                   f"(timeout); it was stopped and starts afresh on the next call")


@dataclass
class CallResult:
    """What a tool call answered: its text, whether the server called it an error, raw data."""

    text: str
    is_error: bool = False
    structured: Any = None


@dataclass
class _Server:
    """One running server: its session (on the loop), its tools, its process."""

    spec: ServerSpec
    spawned: Spawned = field(default_factory=Spawned)
    session: Any = None
    tools: dict[str, RemoteTool] = field(default_factory=dict)
    hidden: list[str] = field(default_factory=list)  # tools the config does not expose
    stop: asyncio.Event | None = None
    task: concurrent.futures.Future[None] | None = None
    stderr: Any = None
    confinement: Any = None

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self.stderr.flush()
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - _STDERR_TAIL))
            return str(self.stderr.read().decode("utf-8", "replace").strip())
        return ""


class McpSessions:
    """The configured servers of a run; each starts lazily and all stop in `close`."""

    def __init__(self, servers: Iterable[ServerSpec], *, workspace: Path | str,
                 sandbox: SandboxPolicy | None = None) -> None:
        self.specs = {spec.name: spec for spec in servers}
        self.workspace = str(workspace)
        self.sandbox = sandbox or SandboxPolicy()
        self._running: dict[str, _Server] = {}
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.started: list[int] = []  # every server pid this run started, in order
        self.failures: dict[str, str] = {}  # an action's key -> why its server was unusable

    # -- what exists ---------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.specs)

    def spec(self, name: str) -> ServerSpec:
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(self.names()) or "none are configured (add [[mcp]] to the config)"
            raise McpError(f"unknown MCP server {name!r}; the servers are: {known}")
        return spec

    def tools(self, name: str, on_spawn: Callable[[int], None] | None = None) -> list[RemoteTool]:
        """The exposed tools of server `name`, starting it if needed."""
        server = self._server(name)
        _report(server, on_spawn)
        return list(server.tools.values())

    def tool(self, name: str, tool: str) -> RemoteTool:
        """One exposed tool; an `McpError` listing the server's tools when there is no such."""
        server = self._server(name)
        found = server.tools.get(tool)
        if found is None:
            known = ", ".join(sorted(server.tools)) or "none"
            why = " (the config does not expose it)" if tool in server.hidden else ""
            raise McpError(f"MCP server {name!r} has no tool {tool!r}{why}; its tools are: "
                           f"{known}")
        return found

    def reference(self) -> str:
        """The MCP section of the command reference: every exposed tool (starts the servers)."""
        from normalize.mcp.catalog import reference

        tools: list[RemoteTool] = []
        problems: list[str] = []
        for name in self.names():
            try:
                tools += self.tools(name)
            except McpError as exc:
                problems.append(f"mcp {name}: unavailable ({exc})")
        return reference(tools, problems)

    def pids(self) -> list[int]:
        """The pids of the servers running now."""
        with self._lock:
            return [s.spawned.pid for s in self._running.values() if s.spawned.pid]

    # -- calls ---------------------------------------------------------------------------

    def call(self, name: str, tool: str, args: dict[str, Any], *,
             cancel: CancelToken | None = None,
             on_spawn: Callable[[int], None] | None = None) -> CallResult:
        """Call `tool` on server `name` with `args`, within the server's timeout."""
        server = self._server(name)
        _report(server, on_spawn)
        spec = server.spec
        try:
            return self._wait(self._call(server, tool, args), spec.timeout + 5, cancel)
        except _Broken:
            self.stop(name)
            raise
        except TimeoutError:
            self.stop(name)
            raise _timed_out(spec, tool) from None

    async def _call(self, server: _Server, tool: str, args: dict[str, Any]) -> CallResult:
        spec = server.spec
        call = asyncio.ensure_future(server.session.call_tool(tool, args))
        watch: set[asyncio.Future[Any]] = {call}
        if server.spawned.closed is not None:
            watch.add(server.spawned.closed)
        done, _ = await asyncio.wait(watch, timeout=spec.timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if call not in done:
            call.cancel()
            if done:
                raise await _died(server, tool)
            raise _timed_out(spec, tool)
        try:
            result = call.result()
        except Exception as exc:  # an MCP protocol error: the tool is unknown, a bad call
            if server.spawned.closed is not None and server.spawned.closed.done():
                raise await _died(server, tool) from None
            raise McpError(f"MCP server {spec.name!r} refused {tool}: {exc}") from None
        return _result(result)

    # -- starting and stopping -----------------------------------------------------------

    def _server(self, name: str) -> _Server:
        spec = self.spec(name)
        with self._lock:
            server = self._running.get(name)
            if server is not None and not _dead(server):
                return server
            if server is not None:
                self.stop(name)
            server = self._start(spec)
            self._running[name] = server
        return server

    def _start(self, spec: ServerSpec) -> _Server:
        server = _Server(spec)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        if spec.transport == "stdio":
            server.confinement = self._confine(spec)
            server.stderr = tempfile.TemporaryFile(prefix=f"normalize-mcp-{spec.name}-")
        loop = self._ensure_loop()
        server.task = asyncio.run_coroutine_threadsafe(self._serve(server, ready), loop)
        done, _ = concurrent.futures.wait([ready, server.task], timeout=spec.timeout,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        if ready in done and ready.exception() is None:
            if server.spawned.pid:
                self.started.append(server.spawned.pid)
            return server
        error = ready.exception() if ready.done() else None
        if error is None and server.task.done() and not server.task.cancelled():
            error = server.task.exception()
        failure = self._start_failure(spec, server, error)
        self._shutdown(server)
        raise failure

    def _confine(self, spec: ServerSpec) -> Any:
        """The sandbox for a stdio server (its own settings over the run's); fails closed."""
        policy = replace(self.sandbox, hosts=())  # a run's host list is for its programs
        if spec.sandbox is not None:
            policy = replace(policy, mode=SandboxMode(spec.sandbox))
        if spec.network is not None:
            policy = replace(policy, network=spec.network)
        abi, tier = 0, SandboxTier.NONE
        if policy.mode is not SandboxMode.OFF:
            found = probe()
            if not found.available:
                raise McpError(f"MCP server {spec.name!r} was not started: the sandbox is "
                               f"unavailable ({found.reason}); set sandbox = \"off\" in its "
                               f"table or run with --sandbox off to start it unconfined")
            abi, tier = found.landlock_abi, found.tier
        try:
            confinement = confine(policy, self.workspace, abi=abi, env=os.environ,
                                  label=f"mcp-{spec.name}", tier=tier,
                                  visible=(spec.command or "", *spec.args))
        except OSError as exc:
            raise McpError(f"MCP server {spec.name!r} was not started: the sandbox could not "
                           f"be prepared ({exc.strerror or exc})") from None
        confinement.env.update(spec.env)
        return confinement

    def _start_failure(self, spec: ServerSpec, server: _Server,
                       error: BaseException | None) -> McpError:
        tail = server.stderr_tail()
        error = None if error is None else _leaf(error)
        if error is None:
            why = f"it did not finish starting within {spec.timeout:g} s (timeout)"
        elif isinstance(error, FileNotFoundError):
            why = f"program not found: {spec.command} (install it, or check the name and PATH)"
        elif isinstance(error, OSError):
            why = f"cannot run {spec.command}: {error.strerror or error}"
        elif server.spawned.exit_status() is not None or (
                server.spawned.closed is not None and server.spawned.closed.done()):
            why = f"it exited before the MCP handshake{_exit_phrase(server)}"
        else:
            leaf = _leaf(error)
            why = f"{type(leaf).__name__}: {leaf}".rstrip(": ")
        if spec.transport == "http":
            return McpError(f"MCP server {spec.name!r} failed to start ({spec.shown}): {why}")
        return McpError(f"MCP server {spec.name!r} failed to start ({spec.shown}): {why}"
                        f"{_tail(tail)}")

    async def _serve(self, server: _Server, ready: concurrent.futures.Future[None]) -> None:
        """The life of one server's session, from the handshake to `stop`."""
        from mcp import ClientSession

        server.stop = asyncio.Event()
        try:
            async with self._transport(server) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                server.session = session
                await self._list(server, session)
                ready.set_result(None)
                waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(server.stop.wait())}
                if server.spawned.closed is not None:
                    waiters.add(server.spawned.closed)
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waiters:
                    waiter.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    McpError("the server's start was cancelled"))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            server.session = None

    def _transport(self, server: _Server) -> Any:
        spec = server.spec
        if spec.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            return _streams(streamable_http_client(spec.url))
        from normalize.mcp.transport import sandboxed_stdio

        confinement = server.confinement
        return sandboxed_stdio([spec.command, *spec.args], cwd=self.workspace,
                               env=confinement.env, preexec=confinement.preexec,
                               stderr=server.stderr, spawned=server.spawned)

    async def _list(self, server: _Server, session: Any) -> None:
        cursor: str | None = None
        from mcp_types import PaginatedRequestParams

        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            listing = await session.list_tools(params=params)
            for tool in listing.tools:
                hint = tool.annotations.read_only_hint if tool.annotations else None
                remote = RemoteTool(server.spec.name, tool.name, tool.description or "",
                                    dict(tool.input_schema or {}), bool(hint))
                if server.spec.exposes(tool.name):
                    server.tools[tool.name] = remote
                else:
                    server.hidden.append(tool.name)
            cursor = listing.next_cursor
            if not cursor:
                return

    def stop(self, name: str) -> None:
        """Stop server `name` (a fresh one starts on its next use)."""
        with self._lock:
            server = self._running.pop(name, None)
        if server is not None:
            self._shutdown(server)

    def _shutdown(self, server: _Server) -> None:
        loop = self._loop
        if loop is not None and server.stop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(server.stop.set)
        if server.task is not None and server.session is None:
            server.task.cancel()  # still in the handshake: nothing to wind down politely
        if server.task is not None:
            try:
                server.task.result(timeout=5)
            except (concurrent.futures.TimeoutError, TimeoutError):
                server.task.cancel()
                with contextlib.suppress(Exception, concurrent.futures.CancelledError):
                    server.task.result(timeout=5)
            except (Exception, concurrent.futures.CancelledError):
                pass
        if server.spawned.pid:
            kill_group(server.spawned.pid)
        if server.confinement is not None:
            server.confinement.close()
        if server.stderr is not None:
            server.stderr.close()

    def close(self) -> None:
        """Stop every server and the loop thread; safe to call twice."""
        with self._lock:
            names = list(self._running)
        for name in names:
            self.stop(name)
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()

    def __enter__(self) -> McpSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop ------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="normalize-mcp",
                                          daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _wait(self, coro: Coroutine[Any, Any, T], timeout: float,
              cancel: CancelToken | None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        waited = 0.0
        while True:
            try:
                return future.result(timeout=_POLL)
            except concurrent.futures.TimeoutError:
                waited += _POLL
            if cancel is not None and cancel.cancelled:
                future.cancel()
                raise _Broken("cancelled while the MCP call ran; its outcome is unknown")
            if waited >= timeout:
                future.cancel()
                raise TimeoutError


def _leaf(error: BaseException) -> BaseException:
    """The first real exception inside exception groups (the SDK's task groups wrap them)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _report(server: _Server, on_spawn: Callable[[int], None] | None) -> None:
    """Tell the action in flight which server process it talks to (the engine journals it)."""
    if on_spawn is not None and server.spawned.pid:
        on_spawn(server.spawned.pid)


def _dead(server: _Server) -> bool:
    closed = server.spawned.closed
    return server.session is None or (closed is not None and closed.done()) or bool(
        server.task and server.task.done())


async def _died(server: _Server, tool: str) -> _Broken:
    """The error for a server whose stdout closed during a call (reaped first, for its status)."""
    process = server.spawned.process
    if process is not None and process.returncode is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), 0.5)
    return _Broken(f"MCP server {server.spec.name!r} died during {tool}"
                    f"{_exit_phrase(server, 0)}; the call's outcome is unknown; it starts "
                    f"afresh on the next call{_tail(server.stderr_tail())}")


def _exit_phrase(server: _Server, wait: float = 0.3) -> str:
    code = server.spawned.exit_status(wait)
    return f" (exit status {code})" if code is not None and code >= 0 else ""


def _tail(text: str) -> str:
    return f"; its stderr ends with:\n{text}" if text else "; it wrote nothing to stderr"


def _result(result: Any) -> CallResult:
    """The text of a `CallToolResult`: text blocks, then a note for anything else."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        import json

        parts.append(json.dumps(structured, indent=2, ensure_ascii=False))
    return CallResult("\n".join(parts), bool(result.is_error), structured)


@contextlib.asynccontextmanager
async def _streams(context: Any) -> Any:
    """The first two streams of an SDK transport context (HTTP yields a third on some versions)."""
    async with context as streams:
        yield streams[0], streams[1]
