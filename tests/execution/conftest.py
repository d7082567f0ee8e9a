"""Fixtures for the execution tests: a tool context over a temporary workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from normalize.execution.cache import MemoryCache, ResultCache
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext
from normalize.tools.guard import WorkspaceGuard


class AllowAll:
    """An approval policy double that lets every action run."""

    def check(self, action: Action, ctx: ToolContext,
              detail: Callable[[], str] | None = None) -> ActionResult | None:
        return None


MakeContext = Callable[..., ToolContext]


@pytest.fixture
def make_ctx(tmp_path: Path) -> MakeContext:
    """Build a ToolContext over `tmp_path` with a given cache (default: memory)."""

    def build(cache: ResultCache | None = None, **kw: Any) -> ToolContext:
        return ToolContext(
            workspace=tmp_path,
            guard=WorkspaceGuard(tmp_path),
            cache=cache if cache is not None else MemoryCache(),
            policy=AllowAll(),  # type: ignore[arg-type]
            **kw,
        )

    return build
