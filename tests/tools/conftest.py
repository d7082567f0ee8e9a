"""Shared fixtures for tool tests: a workspace, a ToolContext, running a tool via the registry."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from normalize.task import Action, ActionResult
from normalize.tools.base import Tool, ToolContext, ToolRegistry
from normalize.tools.guard import WorkspaceGuard

CODE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"

RunTool = Callable[..., ActionResult]


class KeepAllCache:
    """A cache double: keeps everything, never shortens a result."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def store(self, content: str) -> str:
        cache_id = f"r{len(self.items) + 1}"
        self.items[cache_id] = content
        return cache_id

    def retrieve(self, cache_id: str) -> str | None:
        return self.items.get(cache_id)

    def preview(self, content: str) -> tuple[str, str | None]:
        return content, None


class AllowAll:
    """An approval-policy double; read-only tools never consult it."""

    def check(self, action: Action, ctx: ToolContext,
              detail: Callable[[], str] | None = None) -> ActionResult | None:
        return None


@pytest.fixture
def tool_ctx(tmp_path: Path) -> ToolContext:
    """A context whose workspace is `tmp_path/ws`; `tmp_path` itself is "outside"."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return ToolContext(
        workspace=workspace,
        guard=WorkspaceGuard(workspace),
        cache=cast(Any, KeepAllCache()),
        policy=cast(Any, AllowAll()),
    )


@pytest.fixture
def run_tool(tool_ctx: ToolContext) -> RunTool:
    """`run_tool(tool, *args)`: execute a command through a `ToolRegistry`, as the engine does."""

    def run(tool: Tool, *args: str) -> ActionResult:
        action = Action(tool=tool.name, params={"args": list(args)}, text=" ".join(args))
        return ToolRegistry([tool]).execute(action, tool_ctx)

    return run


@pytest.fixture
def samples(tool_ctx: ToolContext) -> Path:
    """The workspace, holding a copy of every code sample in tests/fixtures/code (top level)."""
    for sample in CODE_FIXTURES.iterdir():
        if sample.is_file():
            shutil.copy(sample, tool_ctx.workspace / sample.name)
    return tool_ctx.workspace
