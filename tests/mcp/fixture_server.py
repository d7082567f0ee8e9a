"""A small MCP server for the fault cases, written with the official SDK (stdio or HTTP).

`python fixture_server.py [--fail-start | --hang-start | --http PORT]`; tools: `echo` and
`pid` (read-only), `slow` (sleeps, writes its pid first), `touch` (writes a file; not
read-only), `die` (exits mid-call). In the sandbox a process sees only its own PID
namespace, so the "pid" it gives is a name it sets as its command name (`comm`),
which a test finds in the host's /proc (`mcp_helpers.host_pid`).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

if "--fail-start" in sys.argv:
    sys.stderr.write("fixture: cannot open the frobnicator database\n")
    sys.exit(3)
if "--hang-start" in sys.argv:
    time.sleep(3600)

IDENTITY = f"fx{secrets.token_hex(6)}"
ctypes.CDLL(None).prctl(15, IDENTITY.encode(), 0, 0, 0)  # PR_SET_NAME: seen from outside

server = MCPServer("fixture")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str, times: int = 1) -> str:
    """Echo the text back, `times` times."""
    return " ".join([text] * times)


@server.tool()
def slow(seconds: float, marker: str = "") -> str:
    """Sleep for a while, then answer."""
    if marker:
        Path(marker).write_text(IDENTITY)
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """This server's identity (its command name; see the module's docstring)."""
    return IDENTITY


@server.tool()
def touch(name: str) -> str:
    """Create a file in the working directory."""
    Path(name).write_text("touched\n")
    return f"created {name}"


@server.tool()
def die() -> str:
    """Exit in the middle of the call."""
    sys.stderr.write("fixture: dying on purpose\n")
    sys.stderr.flush()
    os._exit(7)


if __name__ == "__main__":
    if "--http" in sys.argv:  # streamable HTTP on loopback: --http PORT
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
