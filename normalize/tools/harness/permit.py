"""normalize's approval policy answering Claude Code's permission prompts, over MCP (stdio).

Claude Code, given `--permission-prompt-tool mcp__normalize__approve`, asks this server
before each tool call its own rules do not settle. The call becomes the action normalize
would judge (`Bash` a `run` of its command, an edit tool an `edit` of its file, a reading
tool nothing to judge) and the task's policy decides: allowed, or denied with the reason
(a command a person must approve is denied: no one can be asked mid-turn). The server
runs inside the harness's sandbox, started by Claude Code itself (`server`):

    python -P -m normalize.tools.harness.permit '{"mode": "auto", "deny": [...]}'

A minimal MCP server (newline-delimited JSON-RPC: `initialize`, `tools/list`,
`tools/call`), standard library only, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from normalize.sandbox import SandboxPolicy
from normalize.task import Action

TOOL = "approve"
READING = frozenset({"Read", "Glob", "Grep", "LS", "TodoWrite", "NotebookRead"})
EDITING = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
SCHEMA = {"type": "object", "properties": {
    "tool_name": {"type": "string"}, "input": {"type": "object"},
    "tool_use_id": {"type": "string"}}, "required": ["tool_name", "input"]}


def server(policy_table: dict[str, Any]) -> dict[str, Any]:
    """The MCP server entry (`--mcp-config`) that starts this module with `policy_table`.

    `-P`: Claude Code starts it in the workspace, and a `normalize` package there (the
    person's project may be called that, or the model may write one) must not be imported
    in place of normalize's.
    """
    return {"command": sys.executable,
            "args": ["-P", "-m", "normalize.tools.harness.permit", json.dumps(policy_table)]}


SERVER_PACKAGES = ("normalize", "msgspec", "typing_extensions")
"""The packages the server's interpreter imports beyond the standard library (the events are
msgspec structs): each one's directory must be readable in the sandbox."""


def import_roots() -> list[str]:
    """The directories the server's packages (`SERVER_PACKAGES`) are imported from, which its
    interpreter must read.

    The sandbox keeps this interpreter's virtualenv visible, but an editable install
    (`pip install -e`) imports normalize from its checkout, and a `.pth` file, `PYTHONPATH` or
    `pip install --target` can put a dependency anywhere; one may live under /tmp, which the
    sandbox empties: Python must list each such directory itself to find the package in it.
    """
    import importlib.util

    roots: list[str] = []
    for name in SERVER_PACKAGES:
        spec = importlib.util.find_spec(name)
        where = spec.submodule_search_locations if spec is not None else None
        origin = next(iter(where), None) if where else (spec.origin if spec else None)
        root = str(Path(origin).absolute().parent) if origin else ""
        if root and root not in roots:
            roots.append(root)
    return roots


@dataclass
class _Context:
    """What the policy reads: the sandbox (programs are confined), no person, no MCP."""

    sandbox: SandboxPolicy
    approver: None = None
    mcp: None = None


def action_for(tool: str, given: dict[str, Any]) -> Action | None:
    """The action normalize would judge for a Claude Code tool call (None: nothing to judge)."""
    from normalize.intents import parse_command

    if tool in READING:
        return None
    if tool == "Bash":
        return parse_command(f"run {given.get('command', '')}")
    if tool in EDITING:
        path = str(given.get("file_path") or given.get("notebook_path") or "")
        return Action("edit", {"args": [path]}, text=f"edit {path}")
    return Action(tool, {"args": []}, text=tool)


def decide(policy_table: dict[str, Any], tool: str, given: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's answer: `{"behavior": "allow", "updatedInput": …}` or a deny with why.

    `policy_table` holds `outside`: why the harness's programs are not confined, as
    normalize judged it before the turn (this process runs inside the sandbox, where a
    probe would only find that it cannot make another).
    """
    from normalize.tools.approval import ApprovalPolicy

    action = action_for(tool, given)
    if action is None:
        return {"behavior": "allow", "updatedInput": given}
    table = dict(policy_table)
    outside = table.pop("outside", None)

    class Judged(ApprovalPolicy):
        def outside(self, action: Action, ctx: object) -> str | None:  # noqa: ARG002
            return str(outside) if outside and action.tool == "run" else None

    policy = Judged.from_config(table)
    verdict = policy.check(action, _Context(SandboxPolicy()))
    if verdict is None:
        return {"behavior": "allow", "updatedInput": given}
    why = verdict.error or "refused"
    if verdict.wait is not None:
        why = f"{why} (a person must approve it, and no one can be asked during a harness turn)"
    return {"behavior": "deny", "message": f"normalize: {why}"}


def _answer(message: dict[str, Any], policy_table: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "normalize", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": TOOL, "inputSchema": SCHEMA,
                             "description": "normalize's approval policy decides a tool call"}]}
    elif method == "tools/call" and params.get("name") == TOOL:
        args = params.get("arguments") or {}
        verdict = decide(policy_table, str(args.get("tool_name", "")),
                         dict(args.get("input") or {}))
        result = {"content": [{"type": "text", "text": json.dumps(verdict)}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident,
                "error": {"code": -32601, "message": f"unknown method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def serve(policy_table: dict[str, Any], stdin: TextIO, stdout: TextIO) -> None:
    """Answer requests until stdin ends."""
    for line in stdin:
        if not line.strip():
            continue
        try:
            answer = _answer(json.loads(line), policy_table)
        except (ValueError, AttributeError):
            answer = {"jsonrpc": "2.0", "id": None,
                      "error": {"code": -32700, "message": "not a JSON-RPC message"}}
        if answer is not None:
            stdout.write(json.dumps(answer) + "\n")
            stdout.flush()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}, sys.stdin, sys.stdout)
