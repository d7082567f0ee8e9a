"""The tools: the hands on the codebase, one module per family."""

from __future__ import annotations

from normalize.tools.base import Tool, ToolContext, ToolRegistry


def default_tools() -> ToolRegistry:
    """A registry holding every built-in tool."""
    from normalize.tools.analyze import AnalyzeTool
    from normalize.tools.edit import EditTool, WriteTool
    from normalize.tools.fetch import FetchTool
    from normalize.tools.grep import GrepTool
    from normalize.tools.mcp import McpTool
    from normalize.tools.meta import AskTool, DoneTool, NoteTool, PlanTool
    from normalize.tools.run import RunTool
    from normalize.tools.skeleton import SkeletonTool
    from normalize.tools.test import TestTool
    from normalize.tools.view import ViewTool

    return ToolRegistry([
        ViewTool(), SkeletonTool(), GrepTool(), EditTool(), WriteTool(), RunTool(), TestTool(),
        AnalyzeTool(), FetchTool(), NoteTool(), PlanTool(), AskTool(), DoneTool(), McpTool(),
    ])


__all__ = ["Tool", "ToolContext", "ToolRegistry", "default_tools"]
