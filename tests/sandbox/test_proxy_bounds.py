"""The host-list proxy is bounded: connections capped per program and in all, no thread per
connection in normalize's process, a request head sent slowly and a silent tunnel cut at
their limits, each refusal and cut said in the journal, allowed hosts still served.

The flood is played as the model would (the scripted model in `auto`, CI=true) through the
CLI, in both tiers; normalize's threads are counted in /proc/PID/task while the program
holds its connections open. The time limits are shortened in this process for the rest.
"""

from __future__ import annotations

import json
import os
import socket
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
from sandbox_support import FULL_TIER, make_site, restricted

from normalize.sandbox import SandboxPolicy, proxy
from normalize.testing.network import pinned_hosts
from normalize.tools.run import run_process

LAUNCHER = (sys.executable, str(Path(__file__).with_name("pinned_normalize.py")))
FLOOD = 4000
TIERS = {"full": [], "docker": restricted("docker"), "apparmor": restricted("apparmor")}

HOLDER = """\
import os, resource, select, socket, sys, time, urllib.error, urllib.request
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port = os.environ['HTTP_PROXY'].removeprefix('http://').rsplit(':', 1)
held = [socket.create_connection((host, int(port)), timeout=30) for _ in range({flood})]
poll, answered = select.poll(), set()  # wait for the proxy's answer to those over its cap
for s in held:
    poll.register(s, select.POLLIN)
deadline = time.monotonic() + 60
while len(answered) < {flood} - 64 and time.monotonic() < deadline:
    for fd, _ in poll.poll(100):
        answered.add(fd)
        poll.unregister(fd)
open('ready', 'w').write(f"{{len(held)}} held, {{len(answered)}} answered")
while not os.path.exists('gate'):
    time.sleep(0.05)
for s in held:
    s.close()
for attempt in range(50):  # until the proxy has seen its 64 connections go
    try:
        print(urllib.request.urlopen('http://allowed.test/', timeout=30).read().decode().strip())
        break
    except urllib.error.HTTPError as exc:
        if exc.code != 503:
            raise
        time.sleep(0.2)
"""


class Web:
    """A loopback HTTP server answering `hello from HOST`."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
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


class Silent(socketserver.ThreadingTCPServer):
    """Behind CONNECT: accepts and says nothing until its client goes."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                while self.request.recv(1024):
                    pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def web() -> Iterator[Web]:
    server = Web()
    yield server
    server.close()


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:  # it ended
        return 0


@pytest.mark.parametrize("tier", list(TIERS))
def test_thousands_of_idle_connections_cost_no_threads_and_are_refused_over_the_cap(
        tmp_path: Path, web: Web, tier: str) -> None:
    if tier == "full" and not FULL_TIER:
        pytest.skip("this machine has no full tier (namespaces are refused)")
    site = make_site(tmp_path)
    site.prefix = TIERS[tier]
    (site.ws / "hold.py").write_text(HOLDER.format(flood=FLOOD))
    argv = site.argv(["run python3 hold.py", "done"], permissions='network = ["allowed.test"]\n',
                     program=(*LAUNCHER, f"allowed.test=127.0.0.1:{web.port}", "--"))
    proc = subprocess.Popen(argv, cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, held = time.monotonic() + 120, 0
        while not (site.ws / "ready").exists() and proc.poll() is None:
            assert time.monotonic() < deadline, "the program never held its connections"
            held = max(held, _threads(proc.pid))  # normalize's own, while they are opened
            time.sleep(0.05)
        held = max(held, _threads(proc.pid))  # and while 4,000 connections are held open
        (site.ws / "gate").write_text("go")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert ("sandbox tier landlock" in err) == (tier != "full"), err
    assert (site.ws / "ready").read_text() == f"{FLOOD} held, {FLOOD - 64} answered"
    print(f"normalize held {FLOOD} connections with {held} threads")
    assert held < 32, held
    finished = [json.loads(line) for line in out.splitlines()
                if line.startswith("{") and '"action_finished"' in line]
    result = finished[0]
    assert result["status"] == "success", result
    assert "hello from allowed.test" in result["preview"]  # still served after the flood
    network = result["data"]["network"]
    assert {"host": "allowed.test", "allowed": True} in network
    refused = [r["connections"] for r in network
               if r.get("limit") == "refused: over the 64 connections a program may have open"]
    # 64 at a time were served (a slot frees when one is cut at the head limit, 10 s)
    assert refused and FLOOD - 4 * 64 <= refused[0] <= FLOOD - 64, network


SLOW = """\
import json, os, socket, threading, time
host, port = os.environ['HTTPS_PROXY'].removeprefix('http://').rsplit(':', 1)
took = {}

def until_cut(name, s, drip):
    started = time.monotonic()
    s.settimeout(0.4)
    while time.monotonic() - started < 20:
        try:
            if drip:
                s.sendall(b'C')  # a byte of a request line, now and then
            s.recv(4096)  # the 408, or the end of the connection
            break
        except socket.timeout:
            continue
        except OSError:
            break
    took[name] = round(time.monotonic() - started, 1)

loris = socket.create_connection((host, int(port)))
tunnel = socket.create_connection((host, int(port)))
tunnel.sendall(b'CONNECT silent.test:443 HTTP/1.1\\r\\n\\r\\n')
assert tunnel.recv(100).startswith(b'HTTP/1.1 200')
threads = [threading.Thread(target=until_cut, args=('loris', loris, True)),
           threading.Thread(target=until_cut, args=('tunnel', tunnel, False))]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(took))
"""


def test_a_slow_head_and_a_silent_tunnel_are_cut_at_their_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy, "LIMITS", proxy.ProxyLimits(head=2.0, idle=2.0))
    silent = Silent()
    try:
        with pinned_hosts({"silent.test": ("127.0.0.1", silent.port)}):
            outcome = run_process([sys.executable, "-c", SLOW], cwd=tmp_path, timeout=60,
                                  sandbox=SandboxPolicy(hosts=("silent.test",)),
                                  workspace=tmp_path)
    finally:
        silent.close()
    assert outcome.ok, outcome.output
    took = json.loads(outcome.output.strip().splitlines()[-1])
    assert 1.5 <= took["loris"] < 6 and 1.5 <= took["tunnel"] < 6, took
    assert {"limit": "cut: no whole request head within 2 s", "connections": 1} in \
        outcome.network
    assert {"limit": "cut: nothing sent either way for 2 s", "connections": 1} in \
        outcome.network
    assert [t for t in threading.enumerate() if t.name.startswith("normalize-proxy")] == []


def _opened(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(0.5)
    try:
        return sock.recv(200)
    except TimeoutError:
        return b""  # served: the proxy waits for its request


def test_the_cap_for_all_programs_holds_across_proxies() -> None:
    """Two programs' proxies share the cap for all: the third connection is refused to the
    second program though it has none open."""
    limits = proxy.ProxyLimits(per_program=2, total=3)
    proxies = [proxy.Proxy(("a.test",), limits), proxy.Proxy(("a.test",), limits)]
    ports = []
    for each in proxies:
        listener = socket.create_server(("127.0.0.1", 0))
        ports.append(listener.getsockname()[1])
        each.serve(listener)
    opened: list[socket.socket] = []
    try:
        opened = _opened(ports[0], 3)  # two served, one over this program's cap
        first = [_answer(s) for s in opened]
        opened += _opened(ports[1], 2)  # one served (three in all), one over the cap for all
        second = [_answer(s) for s in opened[3:]]
    finally:
        for each in proxies:
            each.close()
        for sock in opened:
            sock.close()
    assert first[:2] == [b"", b""] and first[2].startswith(b"HTTP/1.1 503")
    assert second[0] == b"" and second[1].startswith(b"HTTP/1.1 503")
    assert proxies[0].log() == [{"limit": "refused: over the 2 connections a program may have "
                                          "open", "connections": 1}]
    assert proxies[1].log() == [{"limit": "refused: over the 3 connections all programs may "
                                          "have open", "connections": 1}]
    assert [t for t in threading.enumerate() if t.name.startswith("normalize-proxy")] == []
