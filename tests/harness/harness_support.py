"""The real harness CLIs against normalize's local model servers, with scripted replies.

`.ci/run` installs the pinned CLIs into `.ci/harnesses` (npm for Claude Code and
Codex, a virtualenv of its own for aider); a test of a CLI that is not there
skips, saying so. normalize runs through `tests/sandbox/pinned_normalize.py`,
which pins the model host's name (`api.harness.test`) to the local server for
normalize's proxy: the harness reaches that server and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALLED = REPO / ".ci" / "harnesses"
LAUNCHER = (sys.executable, str(REPO / "tests" / "sandbox" / "pinned_normalize.py"))
HOST = "api.harness.test"
PLACES = {"claude": INSTALLED / "node_modules" / ".bin" / "claude",
          "codex": INSTALLED / "node_modules" / ".bin" / "codex",
          "aider": INSTALLED / "aider" / "bin" / "aider"}


def harness_bin(name: str) -> str:
    """The installed CLI, or a skip naming what installs it."""
    found = PLACES[name] if PLACES[name].exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (.ci/run installs it into .ci/harnesses)")
    return str(found)


@dataclass
class HarnessSite:
    """A fixture project, and normalize run on it with a harness against a local server."""

    ws: Path
    name: str
    program: str
    env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    """The interpreter normalize runs with (and so the one its permission server gets)."""

    def run(self, port: int, *args: str, timeout: float = 240
            ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        """`normalize ARGS` with the model host pinned to the server on `port`; its events."""
        proc = subprocess.run(self.argv(port, *args), cwd=self.ws, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
        return proc, events_of(proc.stdout)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`normalize ARGS` with no model involved (`diff`, `undo`, `tasks show`)."""
        return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=self.ws,
                              env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def argv(self, port: int, *args: str) -> list[str]:
        return [self.python, *LAUNCHER[1:], f"{HOST}=127.0.0.1:{port}", "--", *args]

    def base_url(self, port: int, suffix: str = "") -> str:
        return f"http://{HOST}:{port}{suffix}"


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]


def make_site(root: Path, name: str) -> HarnessSite:
    """A project whose `add` is wrong, and a check that writes `report.txt` when it passes."""
    ws = root / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "check.py").write_text('from calc import add\n\nassert add(2, 3) == 5, "add is wrong"\n'
                                 'open("report.txt", "w").write("ok\\n")\nprint("check passed")\n')
    env = {**os.environ, "CI": "true", "ANTHROPIC_API_KEY": "sk-ant-test-key",
           "OPENAI_API_KEY": "sk-test-key", f"NORMALIZE_{name.upper()}_BIN": harness_bin(name)}
    env.pop("NO_COLOR", None)
    return HarnessSite(ws=ws, name=name, program=env[f"NORMALIZE_{name.upper()}_BIN"], env=env)


def checkout_under(root: Path) -> str:
    """A Python whose normalize is a copy of this checkout under `root`, installed as
    `pip install -e` does (a `.pth` naming the checkout), with this one's dependencies.

    `root` is a pytest temporary directory, so under /tmp, which the sandbox empties: as
    for a person who cloned normalize there.
    """
    checkout = root / "checkout"
    for part in ("normalize", "workflows"):
        shutil.copytree(REPO / part, checkout / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "_editable_checkout.pth").write_text(f"{checkout}\n{sysconfig.get_path('purelib')}\n")
    return str(venv / "bin" / "python")


class Listener:
    """Another loopback TCP listener (not the model's), counting the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nsecret")
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()
