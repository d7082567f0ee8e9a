"""`network = ["allowed.test"]`: programs reach the listed hosts through normalize's proxy only.

Played as the model would (the scripted model in `auto`, non-interactive,
CI=true): normalize runs through a launcher that pins the test names to
loopback servers this test starts (`normalize.testing.network`), so nothing
reaches the internet. `other.test` is pinned too, to a server of its own: only
the proxy's host check stands between the program and it.
"""

from __future__ import annotations

import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Site, make_site

from normalize.sandbox import SandboxPolicy, SandboxTier, confine, probe
from normalize.testing.network import pinned_hosts
from normalize.tools.run import run_process

LAUNCHER = (sys.executable, str(Path(__file__).with_name("pinned_normalize.py")))
CLIENT = """\
import os, socket, sys, urllib.request
mode, arg = sys.argv[1], sys.argv[2]
if mode == "get":
    print(urllib.request.urlopen(arg, timeout=10).read().decode())
elif mode == "connect":
    host, port = os.environ["HTTPS_PROXY"].removeprefix("http://").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(("CONNECT " + arg + " HTTP/1.1\\r\\nHost: " + arg + "\\r\\n\\r\\n").encode())
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        head += s.recv(1)
    print(head.split(b"\\r\\n")[0].decode())
    s.sendall(b"ping\\n")
    print(s.recv(100).decode())
elif mode == "direct":
    socket.create_connection(("127.0.0.1", int(arg)), timeout=3)
    print("connected directly")
elif mode == "env":
    print("proxy", os.environ.get("HTTPS_PROXY"), os.environ.get("http_proxy"),
          "no_proxy", os.environ.get("NO_PROXY"), os.environ.get("no_proxy"))
"""


class Web:
    """A loopback HTTP server answering `hello from HOST`, counting its requests."""

    def __init__(self) -> None:
        owner = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append(self.headers.get("Host", ""))
                body = f"hello from {self.headers.get('Host')}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Echo(socketserver.ThreadingTCPServer):
    """A plain TCP server behind CONNECT: `echo: LINE` for the first line it reads."""

    daemon_threads = True

    def __init__(self) -> None:
        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.wfile.write(b"echo: " + self.rfile.readline())

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    allowed, other, echo = Web(), Web(), Echo()
    yield {"allowed": allowed, "other": other, "echo": echo}
    for server in (allowed, other, echo):
        server.close()


def _pins(servers: dict[str, Any]) -> list[str]:
    return ["--", *[f"{name}=127.0.0.1:{port}" for name, port in (
        ("allowed.test", servers["allowed"].port), ("other.test", servers["other"].port),
        ("tcp.echo.test", servers["echo"].port))]]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory,
            servers: dict[str, Any]) -> tuple[Site, dict[str, dict[str, Any]]]:
    site = make_site(tmp_path_factory.mktemp("hosts"))
    commands = {
        "allowed": "run python3 net.py get http://allowed.test/",
        "other": "run python3 net.py get http://other.test/",
        "direct": f"run python3 net.py direct {servers['allowed'].port}",
        "connect": "run python3 net.py connect tcp.echo.test:443",
        "env": "run python3 net.py env -",
    }
    replies = [f"Writing net.py.\nwrite net.py <<EOF\n{CLIENT}EOF", *commands.values(), "done"]
    pins = _pins(servers)
    program = (*LAUNCHER, *pins[1:], "--")
    proc, finished = site.agent(
        replies, permissions='network = ["allowed.test", "*.echo.test"]\n',
        program=program, extra_env={"NO_PROXY": "*", "no_proxy": "*"})
    assert proc.returncode == 0, proc.stderr
    results = finished[1:]
    assert len(results) == len(commands), [r.get("command") for r in finished]
    return site, dict(zip(commands, results, strict=True))


def _text(result: dict[str, Any]) -> str:
    return f"{result.get('error') or ''}\n{result.get('preview') or ''}"


def test_the_allowed_host_answers_through_the_proxy(
        session: tuple[Site, dict[str, dict[str, Any]]], servers: dict[str, Any]) -> None:
    _, results = session
    assert results["allowed"]["status"] == "success", _text(results["allowed"])
    assert "hello from allowed.test" in results["allowed"]["preview"]
    assert "allowed.test" in servers["allowed"].requests
    assert results["allowed"]["data"]["network"] == [{"host": "allowed.test", "allowed": True}]


def test_another_host_is_refused_by_the_proxy(
        session: tuple[Site, dict[str, dict[str, Any]]], servers: dict[str, Any]) -> None:
    _, results = session
    assert results["other"]["status"] == "error"
    assert "403" in _text(results["other"])
    assert servers["other"].requests == []  # pinned and listening: only the check refused it
    assert results["other"]["data"]["network"] == [{"host": "other.test", "allowed": False}]


def test_a_direct_connection_is_refused_by_the_sandbox(
        session: tuple[Site, dict[str, dict[str, Any]]]) -> None:
    _, results = session
    assert results["direct"]["status"] == "error", _text(results["direct"])
    assert "connected directly" not in _text(results["direct"])
    assert "network" not in results["direct"]["data"]


def test_https_goes_through_connect_to_a_wildcard_host(
        session: tuple[Site, dict[str, dict[str, Any]]]) -> None:
    _, results = session
    assert results["connect"]["status"] == "success", _text(results["connect"])
    preview = results["connect"]["preview"]
    assert "200 Connection established" in preview and "echo: ping" in preview
    assert results["connect"]["data"]["network"] == [{"host": "tcp.echo.test", "allowed": True}]


def test_the_proxy_variables_are_set_and_no_proxy_cleared(
        session: tuple[Site, dict[str, dict[str, Any]]]) -> None:
    _, results = session
    assert results["env"]["preview"].split() == [
        "proxy", "http://127.0.0.1:3128", "http://127.0.0.1:3128", "no_proxy", "None", "None"]


def test_tasks_show_and_the_report_name_both_hosts(
        session: tuple[Site, dict[str, dict[str, Any]]]) -> None:
    site, _ = session
    shown = subprocess.run([sys.executable, "-m", "normalize.cli.app", "tasks", "show", "last"],
                           env=site.env, capture_output=True, text=True, timeout=60, check=True)
    lines = [line.strip() for line in shown.stdout.splitlines()]
    assert "network: allowed.test (allowed)" in lines
    assert "network: other.test (refused)" in lines
    report = subprocess.run([sys.executable, "-m", "normalize.cli.app", "report", "last", "-o",
                             "-"], env=site.env, capture_output=True, text=True, timeout=60,
                            check=True)
    assert "network: other.test (refused)" in report.stdout


def test_a_host_list_from_the_command_line_does_not_ask_in_auto(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    site = make_site(tmp_path)
    proc, finished = site.agent(
        ["run python3 -c \"import urllib.request as u; "
         "print(u.urlopen('http://allowed.test/').read().decode())\"", "done"],
        "--network", "allowed.test", program=(*LAUNCHER, *_pins(servers)[1:], "--"))
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "success" and "hello from allowed.test" in \
        finished[0]["preview"]


def _proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "normalize-proxy"]


def test_the_proxy_leaves_no_thread_or_socket_behind(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    code = ("import urllib.request as u, threading\n"
            "threads = [threading.Thread(target=lambda: u.urlopen('http://allowed.test/'"
            ").read()) for _ in range(4)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "u.urlopen('http://allowed.test/').read()\n")
    fds = len(os.listdir("/proc/self/fd"))
    with pinned_hosts({"allowed.test": ("127.0.0.1", servers["allowed"].port)}):
        outcome = run_process([sys.executable, "-c", code], cwd=ws, timeout=60,
                              sandbox=SandboxPolicy(hosts=("allowed.test",)), workspace=ws)
    assert outcome.ok, outcome.output
    assert outcome.network == [{"host": "allowed.test", "allowed": True}]
    assert _proxy_threads() == []
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_program_holding_a_connection_open_does_not_hold_the_proxy(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    """A daemon keeps a tunnel open after the program exits: the proxy cuts it and stops."""
    ws = tmp_path / "ws"
    ws.mkdir()
    code = ("import os, socket, time\n"
            "s = socket.create_connection(('127.0.0.1', 3128))\n"
            "s.sendall(b'CONNECT tcp.echo.test:443 HTTP/1.1\\r\\n\\r\\n'); s.recv(100)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.setsid(); null = os.open(os.devnull, os.O_RDWR)\n"
            "    os.dup2(null, 1); os.dup2(null, 2); time.sleep(60); os._exit(0)\n"
            "open('pid', 'w').write(str(pid))\n")
    started = time.monotonic()
    with pinned_hosts({"tcp.echo.test": ("127.0.0.1", servers["echo"].port)}):
        outcome = run_process([sys.executable, "-c", code], cwd=ws, timeout=60,
                              sandbox=SandboxPolicy(hosts=("*.echo.test",)), workspace=ws)
    try:
        assert time.monotonic() - started < 30  # not the daemon's 60 s: the tunnel was cut
        assert outcome.ok, outcome.output
        assert outcome.network == [{"host": "tcp.echo.test", "allowed": True}]
        assert _proxy_threads() == []
    finally:
        _kill((ws / "pid").read_text())


def _kill(pid: str) -> None:
    """Stop the daemon the program left (containing it is not this test's subject)."""
    assert int(pid) > 1, pid
    try:
        os.kill(int(pid), signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
        if ") Z" in stat:
            break  # a zombie of an init that reaps later
        time.sleep(0.02)


def test_without_a_network_namespace_landlock_keeps_the_program_to_the_proxy(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    """The Landlock-only path: the proxy listens in normalize's namespace, one port allowed."""
    if probe().landlock_abi < 4:
        pytest.skip("Landlock TCP rules need ABI 4 (Linux 6.7)")
    code = ("import socket, sys, urllib.request as u\n"
            "print(u.urlopen('http://allowed.test/').read().decode().strip())\n"
            "try:\n    u.urlopen('http://other.test/')\n"
            "except Exception as exc:\n    print('other:', exc)\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {servers['allowed'].port}))\n"
            "    print('connected directly')\n"
            "except OSError as exc:\n    print('direct:', exc.strerror)\n")
    pins = {"allowed.test": ("127.0.0.1", servers["allowed"].port),
            "other.test": ("127.0.0.1", servers["other"].port)}
    with pinned_hosts(pins):
        confinement = confine(SandboxPolicy(hosts=("allowed.test",)), tmp_path,
                              abi=probe().landlock_abi, tier=SandboxTier.LANDLOCK)
        try:
            proc = subprocess.run([sys.executable, "-c", code], env=confinement.env,
                                  preexec_fn=confinement.preexec, capture_output=True,
                                  text=True, timeout=60, check=False)
        finally:
            confinement.close()
    assert confinement.env["HTTP_PROXY"] != "http://127.0.0.1:3128"  # a port of its own
    assert proc.stdout.splitlines() == ["hello from allowed.test", "other: HTTP Error 403: "
                                        "Forbidden", "direct: Permission denied"], proc.stderr
    assert confinement.network_log() == [{"host": "allowed.test", "allowed": True},
                                         {"host": "other.test", "allowed": False}]
    assert _proxy_threads() == []


def test_without_a_namespace_or_landlock_tcp_rules_a_host_list_is_refused(
        tmp_path: Path) -> None:
    """ABI 3 has no TCP rules: nothing would keep the program to the proxy, so none starts."""
    with pytest.raises(OSError, match="a host list needs a network namespace or Landlock TCP"):
        confine(SandboxPolicy(hosts=("allowed.test",)), tmp_path, abi=3,
                tier=SandboxTier.LANDLOCK)
    assert _proxy_threads() == []


def _workspace_flow(site: Site, replies: list[str]) -> None:
    """A workflow found by name in the workspace (untrusted) that lists `allowed.test`."""
    script = site.root / "ws-script.json"
    script.write_text(json.dumps(replies))
    (site.ws / ".normalize" / "workflows" / "fetcher.toml").write_text(
        f'[workflow]\nname = "fetcher"\n[workflow.llm]\nprovider = "scripted"\n'
        f'model = "{script}"\n[workflow.permissions]\nmode = "auto"\n'
        'network = ["allowed.test"]\n')


def _run_by_name(site: Site, servers: dict[str, Any], *flags: str
                 ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    proc = subprocess.run(
        [*LAUNCHER, *_pins(servers)[1:], "--", "run", "fetcher", "--goal", "g", "--json",
         "-w", str(site.ws), *flags], cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=300, check=False)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, [e for e in events if e.get("type") == "action_finished"]


FETCH = ("run python3 -c \"import urllib.request as u; "
         "print(u.urlopen('http://allowed.test/').read().decode())\"")


def test_a_workspace_file_cannot_widen_no_network_to_a_list(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    site = make_site(tmp_path)
    _workspace_flow(site, [FETCH, "done"])
    before = list(servers["allowed"].requests)
    proc, finished = _run_by_name(site, servers)
    assert 'ignored network = "allowed.test" from .normalize/workflows/fetcher.toml' in \
        proc.stderr
    assert finished[0]["status"] == "error" and "network" not in finished[0]["data"]
    assert servers["allowed"].requests == before


def test_a_workspace_file_narrowing_every_host_to_a_list_asks_in_auto(
        tmp_path: Path, servers: dict[str, Any]) -> None:
    site = make_site(tmp_path)
    _workspace_flow(site, [FETCH, "done"])
    (site.store / "config").mkdir()
    (site.store / "config" / "config.toml").write_text("[permissions]\nnetwork = true\n")
    before = list(servers["allowed"].requests)
    _, finished = _run_by_name(site, servers)
    assert finished[0]["status"] == "blocked"
    assert "it reaches allowed.test, hosts a workspace file chose" in finished[0]["error"]
    assert servers["allowed"].requests == before


class Flood(socketserver.ThreadingTCPServer):
    """Behind CONNECT: sends SIZE bytes before reading any, then reads SIZE bytes."""

    daemon_threads = True
    SIZE = 32 * 1024 * 1024

    def __init__(self) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.sendall(b"x" * Flood.SIZE)
                left = Flood.SIZE
                while left > 0 and (chunk := self.request.recv(1 << 20)):
                    left -= len(chunk)

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join()


def test_a_tunnel_carries_both_ways_at_once(tmp_path: Path) -> None:
    """The host writes all before it reads while the program reads as it writes, as a direct
    connection allows: a relay that copied one way at a time would stall."""
    code = ("import socket, threading\n"
            f"size = {Flood.SIZE}\n"
            "s = socket.create_connection(('127.0.0.1', 3128))\n"
            "s.sendall(b'CONNECT flood.test:443 HTTP/1.1\\r\\n\\r\\n')\n"
            "head = b''\n"
            "while not head.endswith(b'\\r\\n\\r\\n'):\n    head += s.recv(1)\n"
            "got = [0]\n"
            "def read():\n"
            "    while got[0] < size:\n        got[0] += len(s.recv(1 << 20))\n"
            "reader = threading.Thread(target=read); reader.start()\n"
            "s.sendall(b'y' * size); reader.join()\n"
            "print('both ways', got[0])\n")
    flood = Flood()
    try:
        with pinned_hosts({"flood.test": ("127.0.0.1", flood.port)}):
            outcome = run_process([sys.executable, "-c", code], cwd=tmp_path, timeout=30,
                                  sandbox=SandboxPolicy(hosts=("flood.test",)),
                                  workspace=tmp_path)
    finally:
        flood.close()
    assert outcome.ok and f"both ways {Flood.SIZE}" in outcome.output, outcome.output
    assert _proxy_threads() == []
