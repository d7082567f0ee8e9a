"""A stdio transport for the SDK's `ClientSession` whose server runs under normalize's sandbox.

The SDK's own `stdio_client` starts the program itself, with no way to confine
it; this one starts it the way `tools/run.py` starts every program (scrubbed
environment, Landlock and namespaces applied between fork and exec, its own
process group) and also asks the kernel to kill it if normalize dies
(`PR_SET_PDEATHSIG`), so a `kill -9` leaves no server behind. Messages are
newline-delimited JSON-RPC, as the MCP stdio transport defines them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from typing import IO, Any

__all__ = ["Spawned", "kill_group", "sandboxed_stdio"]

PR_SET_PDEATHSIG = 1
_LINE_LIMIT = 64 * 1024 * 1024
_EXIT_GRACE = 1.0


@cache
def _prctl() -> Any:
    from normalize.sandbox.landlock import libc

    return libc().prctl


def _preexec(inner: Callable[[], None] | None) -> Callable[[], None]:
    prctl = _prctl()  # looked up before the fork (see normalize.sandbox.landlock)

    def apply() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if inner is not None:
            inner()

    return apply


def kill_group(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Signal a server's whole process group; gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@dataclass
class Spawned:
    """What the transport tells its owner: the pid, and a future set when stdout closes."""

    pid: int = 0
    closed: asyncio.Future[None] | None = None
    process: asyncio.subprocess.Process | None = None

    def exit_status(self, wait: float = 0.3) -> int | None:
        """The server's exit status once it has exited (waiting up to `wait` s), else None."""
        deadline = time.monotonic() + wait
        while self.process is not None:
            if self.process.returncode is not None:
                return self.process.returncode
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)
        return None


@asynccontextmanager
async def sandboxed_stdio(argv: list[str], *, cwd: str, env: dict[str, str],
                          preexec: Callable[[], None] | None, stderr: IO[bytes],
                          spawned: Spawned) -> AsyncIterator[tuple[Any, Any]]:
    """Start `argv` and yield the (read, write) streams a `ClientSession` takes."""
    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        cwd=cwd, env=env, start_new_session=True, preexec_fn=_preexec(preexec),
        limit=_LINE_LIMIT)
    spawned.pid, spawned.process = proc.pid, proc
    spawned.closed = asyncio.get_running_loop().create_future()
    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)
    assert proc.stdout is not None and proc.stdin is not None
    stdout, stdin = proc.stdout, proc.stdin

    async def reader() -> None:
        try:
            async with read_send:
                while line := await stdout.readline():
                    if not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False)
                    except ValueError as exc:
                        await read_send.send(exc)
                        continue
                    await read_send.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass
        finally:
            if spawned.closed is not None and not spawned.closed.done():
                spawned.closed.set_result(None)

    async def writer() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError,
                                 ConnectionError, OSError):
            async with write_recv:
                async for item in write_recv:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode("utf-8") + b"\n")
                    await stdin.drain()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            try:
                yield read_recv, write_send
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin, give the server a moment to exit, then kill its process group; reap it."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()
    if proc.returncode is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), _EXIT_GRACE)
    kill_group(proc.pid)  # the server's own children too, even when it exited
    if proc.returncode is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), _EXIT_GRACE)
