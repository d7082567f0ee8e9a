"""A streamable-HTTP server (`url = ...`) is called like a stdio one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import FIXTURE_SERVER

from normalize.mcp.client import McpError, McpSessions
from normalize.mcp.config import parse_servers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(FIXTURE_SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def test_a_url_server_lists_and_answers(http_server: str, tmp_path: Path) -> None:
    servers = parse_servers([{"name": "web", "url": http_server, "timeout": 20}], "test")
    with McpSessions(servers, workspace=tmp_path) as sessions:
        assert {t.name for t in sessions.tools("web")} >= {"echo", "slow", "pid"}
        assert sessions.call("web", "echo", {"text": "over http", "times": 2}).text == (
            "over http over http")


def test_an_unreachable_url_fails_to_start_with_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    servers = parse_servers([{"name": "web", "url": url, "timeout": 5}], "test")
    with McpSessions(servers, workspace=tmp_path) as sessions, \
            pytest.raises(McpError) as caught:
        sessions.tools("web")
    assert str(caught.value) == (f"MCP server 'web' failed to start ({url}): ConnectError: "
                                 f"All connection attempts failed")
