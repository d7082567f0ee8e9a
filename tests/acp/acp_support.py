"""What the ACP tests share: an editor (the SDK's client side) that records what it is sent."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

AGENT = ["-m", "normalize.cli.app", "acp"]
"""`normalize acp`, as the tests start it (with sys.executable)."""


class Editor:
    """An ACP client that records every update and answers permission requests in turn."""

    def __init__(self, answers: list[str]) -> None:
        self.updates: list[Any] = []
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.answers = answers

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list[PermissionOption], session_id: str,
                                 tool_call: ToolCallUpdate, **_: Any
                                 ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        choice = self.answers.pop(0) if self.answers else "allow_once"
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=choice))

    def tool_updates(self) -> list[tuple[str, str, str | None]]:
        """(kind of update, tool call id, status) for every tool call and its updates."""
        return [("start" if isinstance(u, ToolCallStart) else "update", u.tool_call_id, u.status)
                for u in self.updates if isinstance(u, ToolCallStart | ToolCallProgress)]

    def titles(self) -> dict[str, str]:
        return {u.tool_call_id: u.title for u in self.updates if isinstance(u, ToolCallStart)}


def agent_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    env["NORMALIZE_HOME"] = str(home)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


async def until(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def running_in(root: Path) -> list[str]:
    """The processes whose working directory is `root` (none should outlive their action)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cwd").readlink() == root:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
