"""The MCP server that answers Claude Code's permission prompts with normalize's policy,
spoken to as Claude Code does (newline-delimited JSON-RPC over stdio)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from normalize.tools.harness.permit import decide, server


def converse(policy: dict[str, Any], *messages: dict[str, Any]) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    started = server(policy)  # as Claude Code starts it
    proc = subprocess.run([started["command"], *started["args"]], input=lines,
                          capture_output=True, text=True, timeout=60, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def call(ident: int, tool: str, given: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
            "params": {"name": "approve", "arguments": {"tool_name": tool, "input": given}}}


def test_the_server_speaks_mcp_and_answers_with_the_policy() -> None:
    answers = converse(
        {"mode": "auto", "deny": ["git push*"], "outside": None},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        call(3, "Bash", {"command": "git push origin main"}),
        call(4, "Bash", {"command": "pytest -q"}),
        {"jsonrpc": "2.0", "id": 5, "method": "resources/list"})
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5]  # the notification is not answered
    assert answers[0]["result"]["serverInfo"]["name"] == "normalize"
    assert [t["name"] for t in answers[1]["result"]["tools"]] == ["approve"]
    denied = json.loads(answers[2]["result"]["content"][0]["text"])
    assert denied["behavior"] == "deny" and "deny pattern 'git push*'" in denied["message"]
    allowed = json.loads(answers[3]["result"]["content"][0]["text"])
    assert allowed == {"behavior": "allow", "updatedInput": {"command": "pytest -q"}}
    assert answers[4]["error"]["code"] == -32601


def test_the_policy_judges_edits_reads_and_programs_outside_the_sandbox() -> None:
    never = {"mode": "never"}
    assert decide(never, "Read", {"file_path": "a.py"})["behavior"] == "allow"
    assert decide(never, "Edit", {"file_path": "a.py"})["behavior"] == "deny"
    assert decide({"mode": "auto"}, "Edit", {"file_path": "a.py"})["behavior"] == "allow"
    unconfined = {"mode": "auto", "outside": "it runs with --sandbox off"}
    verdict = decide(unconfined, "Bash", {"command": "make"})
    assert verdict["behavior"] == "deny"
    assert "it needs approval (it runs with --sandbox off)" in verdict["message"]
    asked = decide({"mode": "ask"}, "Bash", {"command": "make"})
    assert asked["behavior"] == "deny" and "no one can be asked" in asked["message"]
