"""`normalize acp`: serve normalize as an ACP agent on stdin and stdout (docs/acp.md)."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING, BinaryIO

from normalize.cli.console import Environment, fail
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.acp.agent import AcpSettings

LIMIT = 50 * 1024 * 1024
"""The longest JSON-RPC line read (an embedded file in a prompt can be long)."""


def serve_acp(env: Environment, *, model: str | None, base_url: str | None,
              approve: str | None, sandbox: str | None) -> int:
    """Serve until the client closes stdin; stdout carries the protocol only."""
    from importlib.util import find_spec

    if find_spec("acp") is None:
        return fail(env, UsageError("normalize acp needs the Agent Client Protocol SDK: "
                                    "pip install 'normalize[acp]'"))
    from normalize.acp.agent import AcpSettings
    from normalize.cli.commands import pin_replay
    from normalize.sandbox import SandboxMode
    from normalize.tools.approval import ApprovalMode

    try:
        if approve is not None and approve not in {m.value for m in ApprovalMode}:
            raise UsageError(f"--approve {approve}: unknown approval mode (choose from "
                             f"{', '.join(m.value for m in ApprovalMode)})")
        if sandbox is not None and sandbox not in {m.value for m in SandboxMode}:
            raise UsageError(f"--sandbox {sandbox}: unknown sandbox mode (choose from "
                             f"{', '.join(m.value for m in SandboxMode)})")
        settings = AcpSettings(model=pin_replay(model), base_url=base_url, approve=approve,
                               sandbox=sandbox)
    except NormalizeError as exc:
        return fail(env, exc)
    if env.stdin_tty:  # a person, not an editor: say what this is
        env.stderr.write("normalize acp: an Agent Client Protocol agent on stdin and stdout, "
                         "for an editor to start (docs/acp.md); Ctrl-D stops\n")
        env.stderr.flush()
    try:
        asyncio.run(_serve(settings))
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve(settings: AcpSettings) -> None:
    from normalize.acp.agent import NormalizeAgent, serve

    reader, writer = await _protocol_streams()
    await serve(NormalizeAgent(settings), reader, writer)


async def _protocol_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin and stdout as streams; stdout's descriptor then points at stderr, so nothing
    but the protocol ever reaches the client's end of it. (A file, not a pipe, works too.)"""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LIMIT)
    if _is_pipe(sys.stdin.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:
        threading.Thread(target=_feed, args=(loop, reader), daemon=True).start()
    sys.stdout.flush()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())  # flow control for writes
    if _is_pipe(out.fileno()):
        transport, _ = await loop.connect_write_pipe(lambda: protocol, out)
    else:
        transport = _FileTransport(out)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    """stdin that is a file: its lines handed to the loop from this thread."""
    for line in sys.stdin.buffer:
        loop.call_soon_threadsafe(reader.feed_data, line)
    loop.call_soon_threadsafe(reader.feed_eof)


class _FileTransport(asyncio.WriteTransport):
    """stdout that is a file: each message written as it comes."""

    def __init__(self, out: BinaryIO) -> None:
        super().__init__()
        self.out = out

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.write(data)

    def is_closing(self) -> bool:
        return self.out.closed

    def close(self) -> None:
        self.out.close()
