"""Helpers for the MCP tests: a fixture repository, the user's [[mcp]] config, CLI runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from support.cli import cli as run_cli

PY = sys.executable
BIN = Path(sys.executable).parent
FIXTURE_SERVER = Path(__file__).with_name("fixture_server.py")
CI_ENV = {"CI": "true", "NO_COLOR": "1", "TERM": "dumb"}


def git_repo(root: Path) -> Path:
    """A git repository with one commit and one untracked file."""
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    subprocess.run(["git", "-C", str(root), "add", "calc.py"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "first"], check=True, env=env)
    (root / "notes.txt").write_text("untracked\n")
    return root


def server_table(name: str, command: str, args: list[str], **extra: Any) -> str:
    lines = ["[[mcp]]", f"name = {json.dumps(name)}", f"command = {json.dumps(command)}",
             f"args = {json.dumps(args)}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def time_server() -> str:
    return server_table("time", str(BIN / "mcp-server-time"), ["--local-timezone", "UTC"])


def git_server(repo: Path) -> str:
    return server_table("git", str(BIN / "mcp-server-git"), ["--repository", str(repo)])


def fixture_server(name: str = "fx", *flags: str, **extra: Any) -> str:
    return server_table(name, PY, [str(FIXTURE_SERVER), *flags], **extra)


def write_config(home: Path, *tables: str) -> Path:
    """The user's config.toml under NORMALIZE_HOME (config_home() is HOME/config)."""
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("\n".join(tables))
    return config


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NORMALIZE_CRASH_AT", "NORMALIZE_CONFIG")}
    env.update({"NORMALIZE_HOME": str(home), **CI_ENV})
    return env


cli = partial(run_cli, drop=("NORMALIZE_CRASH_AT", "NORMALIZE_CONFIG"), term=None, env=CI_ENV,
              timeout=120, stdin=subprocess.DEVNULL)
"""`normalize ARGS` as CI runs it: no terminal, CI=true, its own NORMALIZE_HOME."""


def json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def script(path: Path, *replies: str) -> str:
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def host_pid(identity: str) -> int:
    """The host pid of the fixture server that named itself `identity` (0 when none runs)."""
    for name in os.listdir("/proc"):
        try:
            if Path(f"/proc/{name}/comm").read_text().strip() == identity and alive(int(name)):
                return int(name)
        except (OSError, ValueError):
            continue
    return 0


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
