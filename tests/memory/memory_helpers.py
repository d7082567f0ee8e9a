"""A project whose tests run with `make check` (plain `pytest` finds none), and the CLI on it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_helpers import KEYS, cli

from normalize.memory import GUARD
from normalize.testing.servers import FakeModelServer

MAKEFILE = "check:\n\tpython3 -c \"print('3 passed')\"\n"
MODEL = ("--model", "anthropic:claude-sonnet-4-5")
UNATTENDED = ("CI", "GITHUB_ACTIONS")  # the suite may run in CI, where memory is not written


@dataclass
class Project:
    """A workspace, a data home and a model server: `normalize` runs on them."""

    root: Path
    home: Path
    server: FakeModelServer

    def run(self, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        extra = {"ANTHROPIC_BASE_URL": self.server.url, **KEYS, **(env or {})}
        drop = tuple(name for name in UNATTENDED if name not in extra)
        return cli(*args, cwd=self.root, home=self.home, env=extra, drop=drop)

    def agent(self, goal: str, *replies: str, flags: tuple[str, ...] = (),
              env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], str]:
        """`normalize agent GOAL` answered by `replies`; the run and its task id."""
        self.server.add(*replies)
        done = self.run("agent", goal, *MODEL, *flags, env=env)
        task_id = done.stdout.splitlines()[0].split()[1] if done.stdout else ""
        return done, task_id

    def memory(self, *args: str) -> Any:
        """`normalize memory ARGS --json`, parsed."""
        done = self.run("memory", *args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def journal(self, task_id: str) -> list[dict[str, Any]]:
        path = self.home / "tasks" / f"{task_id}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def memory_messages(request: Any) -> list[str]:
    """The request's messages that carry memory (each starts with the guard)."""
    return [str(m["content"]) for m in request.body["messages"]
            if str(m["content"]).startswith(GUARD)]
