"""The `mcp` tool: calls a tool of a configured MCP server, as any other side effect.

`mcp` lists the servers, `mcp SERVER` lists a server's tools, and `mcp SERVER
TOOL key=value …` (or a JSON object as the body) calls one. The registry runs
it like `run`: the approval policy first (a tool the server marks read-only
passes in `auto`; see `normalize.tools.approval`), journaled before and after
(a call in flight at a crash is "outcome unknown" on resume), its output
previewed and cached. The servers belong to the run (`ToolContext.mcp`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from normalize.errors import ToolError
from normalize.mcp.catalog import arguments, usage
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext

if TYPE_CHECKING:  # (the client, and asyncio with it, loads only where servers are configured)
    from normalize.mcp.client import McpSessions

__all__ = ["NO_SERVERS", "McpTool"]

NO_SERVERS = ("no MCP servers are configured; add an [[mcp]] table to the user's config.toml "
              "or [[workflow.mcp]] to the workflow")


def sessions_of(ctx: ToolContext) -> McpSessions:
    if ctx.mcp is None or not ctx.mcp.names():
        raise ToolError(NO_SERVERS)
    return ctx.mcp


def _servers(sessions: McpSessions) -> str:
    lines = ["MCP servers (`mcp SERVER` lists one's tools):"]
    for name in sessions.names():
        spec = sessions.specs[name]
        lines.append(f"  {name}  ({spec.transport}: {spec.shown})")
    return "\n".join(lines)


def _tools(sessions: McpSessions, name: str, ctx: ToolContext) -> str:
    tools = sessions.tools(name, ctx.on_spawn)
    lines = [f"tools of MCP server {name!r}:"]
    for tool in tools:
        effect = "read-only" if tool.read_only else "changes things"
        lines.append(f"  {usage(tool)}  ({effect})")
        lines += [f"      {line}" for line in tool.description.strip().splitlines() if line]
    if not tools:
        lines.append("  (none exposed)")
    return "\n".join(lines)


class McpTool:
    """`mcp SERVER TOOL key=value …`: a configured MCP server's tool."""

    name: ClassVar[str] = "mcp"
    read_only: ClassVar[bool] = False  # journaled as a side effect; approval reads the hint
    summary: ClassVar[str] = "calls a tool of a configured MCP server"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        sessions = sessions_of(ctx)
        from normalize.mcp.client import McpError  # (loaded with the sessions already)

        failure = sessions.failures.pop(action.key, None)
        if failure is not None:  # found while the approval policy looked the tool up
            raise ToolError(failure)
        words = list(action.args)
        if not words:
            return ActionResult(status=ResultStatus.SUCCESS, output=_servers(sessions))
        server = words.pop(0)
        if not words:
            return ActionResult(status=ResultStatus.SUCCESS, output=_tools(sessions, server, ctx))
        name = words.pop(0)
        tool = sessions.tool(server, name)
        args = arguments(tool, words, action.body)
        data: dict[str, object] = {"server": server, "tool": name, "arguments": args,
                                   "read_only": tool.read_only}
        try:
            answer = sessions.call(server, name, args, cancel=ctx.cancel, on_spawn=ctx.on_spawn)
        except McpError as exc:
            if ctx.cancel.cancelled:
                return ActionResult(status=ResultStatus.CANCELLED, error=str(exc), data=data)
            raise
        if answer.is_error:
            first = answer.text.strip().splitlines()[0] if answer.text.strip() else "an error"
            return ActionResult(status=ResultStatus.ERROR, output=answer.text,
                                error=f"{server} {name} answered with an error: {first}",
                                data=data)
        return ActionResult(status=ResultStatus.SUCCESS, output=answer.text, data=data)
