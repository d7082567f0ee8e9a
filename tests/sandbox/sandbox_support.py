"""Helpers for the sandbox tests: a workspace with nested repositories, an outside, a fake HOME."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support import alive_with as pids_with

from normalize.sandbox import SandboxTier, probe

VENV_BIN = str(Path(sys.executable).parent)
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"

if not probe().available:  # pragma: no cover - CI runs where Landlock and user namespaces exist
    pytest.skip(f"no sandbox here: {probe().reason}", allow_module_level=True)

FULL_TIER = probe().tier is SandboxTier.FULL
needs_full = pytest.mark.skipif(not FULL_TIER, reason=f"needs the full tier (namespaces); this "
                                                      f"machine gives {probe().tier.value}")
"""For tests of what only namespaces give (read-only binds, private /dev/shm, no interfaces)."""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=cwd, check=True, capture_output=True)


@dataclass
class Site:
    """The places a test looks at: the workspace, outside it, the fake HOME, the store."""

    root: Path
    ws: Path
    outside: Path
    home: Path
    store: Path
    env: dict[str, str] = field(default_factory=dict)
    prefix: list[str] = field(default_factory=list)
    """A launcher normalize runs under (tests/sandbox/restricted.py for the landlock tier)."""

    def agent(self, replies: list[str], *flags: str, allow_shell: bool = False,
              extra_env: dict[str, str] | None = None, permissions: str = "",
              program: tuple[str, ...] = (sys.executable, "-m", "normalize.cli.app"),
              env_allow: tuple[str, ...] = ()
              ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        """Run a scripted model through `normalize run` in auto, non-interactive, CI=true.

        `permissions` adds lines to the workflow's permissions table; `program`
        is the command that runs normalize.
        """
        proc = subprocess.run(
            self.argv(replies, *flags, allow_shell=allow_shell, env_allow=env_allow,
                      permissions=permissions, program=program),
            cwd=self.ws, env={**self.env, **(extra_env or {})}, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=300, check=False)
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return proc, [e for e in events if e.get("type") == "action_finished"]

    def argv(self, replies: list[str], *flags: str, allow_shell: bool = False,
             env_allow: tuple[str, ...] = (), permissions: str = "",
             program: tuple[str, ...] = (sys.executable, "-m", "normalize.cli.app")
             ) -> list[str]:
        """The `normalize run` command line that plays `replies` as the model (auto mode)."""
        script = self.root / f"script-{len(list(self.root.glob('script-*')))}.json"
        script.write_text(json.dumps(replies))
        flow = script.with_suffix(".toml")
        flow.write_text(f'[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "scripted"\n'
                        f'model = "{script}"\n[workflow.permissions]\nmode = "auto"\n'
                        f'allow_shell = {"true" if allow_shell else "false"}\n'
                        f'env_allow = {json.dumps(list(env_allow))}\n{permissions}')
        return [*self.prefix, *program, "run", str(flow), "--goal", "probe",
                "--json", "-w", str(self.ws), *flags]


alive_with = partial(pids_with, zombies=True)
"""Host pids whose command line holds `token`, a zombie too (`support.alive_with`)."""


def write_action(path: str, text: str) -> str:
    """A model reply that writes `text` to `path` with the `write` tool."""
    return f"Writing {path}.\nwrite {path} <<EOF\n{text}EOF"


def make_site(root: Path) -> Site:
    ws, outside, home, store = (root / name for name in ("ws", "outside", "home", "store"))
    for path in (ws, outside, home / ".ssh", store):
        path.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    (ws / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (ws / "tests").mkdir()
    (ws / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add(tmp_path):\n"
        "    (tmp_path / 'x').write_text('1')\n    assert add(1, 2) == 3\n")
    (ws / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    (ws / ".normalize" / "workflows").mkdir(parents=True)
    git(ws, "init", "-q")
    git(ws, "add", "calc.py", "tests", "pyproject.toml")
    git(ws, "commit", "-qm", "start")
    (ws / "sub").mkdir()
    git(ws / "sub", "init", "-q")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NORMALIZE_")}
    env.update(HOME=str(home), NORMALIZE_HOME=str(store), CI="true",
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
               ANTHROPIC_API_KEY="sk-ant-parent-secret", FOO_TOKEN="foo-parent-secret")
    return Site(root, ws, outside, home, store, env)


RESTRICTED = str(Path(__file__).with_name("restricted.py"))


def restricted(kind: str) -> list[str]:
    """The launcher that runs a command where namespaces are restricted as `kind` does."""
    return [sys.executable, RESTRICTED, kind, "--"]


TIER_PREFIX = {"full": [], "landlock": restricted("docker")}
"""How a test makes normalize choose each tier on this machine."""


class CountingServer:
    """A listening socket served by a thread: counts the connections, answers each `reply`."""

    def __init__(self, sock: socket.socket, reply: bytes = b"") -> None:
        self.sock, self.reply = sock, reply
        self.sock.listen(8)
        self.sock.settimeout(0.1)
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
            if self.reply:
                conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


class UnixListener(CountingServer):
    """A pathname unix socket outside any workspace, counting the connections it accepts."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="nz-sock-")
        self.path = os.path.join(self.dir, "agent.sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(self.path)
        super().__init__(sock)

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Listener(CountingServer):
    """A loopback TCP server in a thread that counts the connections it accepts."""

    def __init__(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        super().__init__(sock)
