"""The tools: the hands on the codebase, one module per family."""

from __future__ import annotations

from functools import partial
from importlib import import_module

from normalize.errors import ConfigError
from normalize.tools.base import Tool, ToolContext, ToolRegistry

BUILTIN_TOOLS: dict[str, str] = {
    "view": "normalize.tools.view:ViewTool",
    "skeleton": "normalize.tools.skeleton:SkeletonTool",
    "grep": "normalize.tools.grep:GrepTool",
    "edit": "normalize.tools.edit:EditTool",
    "write": "normalize.tools.edit:WriteTool",
    "run": "normalize.tools.run:RunTool",
    "test": "normalize.tools.test:TestTool",
    "analyze": "normalize.tools.analyze:AnalyzeTool",
    "fetch": "normalize.tools.fetch:FetchTool",
    "note": "normalize.tools.meta:NoteTool",
    "remember": "normalize.tools.meta:RememberTool",
    "skill": "normalize.tools.meta:SkillTool",
    "plan": "normalize.tools.meta:PlanTool",
    "ask": "normalize.tools.meta:AskTool",
    "done": "normalize.tools.meta:DoneTool",
    "mcp": "normalize.tools.mcp:McpTool",
    "spawn": "normalize.tools.spawn:SpawnTool",
    "harness": "normalize.tools.harness:HarnessTool",
    "record": "normalize.tools.record:RecordTool",
    "permit": "normalize.tools.permit:PermitTool",
}
"""Tool name → `module:Class`, imported only when asked for (one verb, one module)."""


def builtin_tool(name: str) -> Tool:
    """A fresh built-in tool by name, importing only its own module."""
    where = BUILTIN_TOOLS.get(name)
    if where is None:
        raise ConfigError(f"unknown tool {name!r} (choose from {', '.join(BUILTIN_TOOLS)})")
    module, _, cls = where.partition(":")
    tool: Tool = getattr(import_module(module), cls)()
    return tool


def default_tools(names: tuple[str, ...] | None = None) -> ToolRegistry:
    """A registry holding every built-in tool, or only those in `names`; each tool's module
    is imported when the tool is first used."""
    registry = ToolRegistry()
    for name in names or tuple(BUILTIN_TOOLS):
        if name not in BUILTIN_TOOLS:
            builtin_tool(name)  # the unknown-tool error, now
        registry.register_later(name, partial(builtin_tool, name))
    return registry


__all__ = ["BUILTIN_TOOLS", "Tool", "ToolContext", "ToolRegistry", "builtin_tool",
           "default_tools"]
