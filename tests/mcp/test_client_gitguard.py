"""An MCP server runs under the same write guard as a program: a `.git` it makes is refused."""

from __future__ import annotations

from pathlib import Path

from mcp_helpers import cli, fixture_server, json_lines, script, write_config


def test_a_git_pointer_an_mcp_tool_writes_is_refused_and_the_call_fails(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    write_config(normalize_home, fixture_server("fx", timeout=20))
    proc = cli("agent", "go", "--approve", "yes", "--model",
               script(tmp_path / "a.json", "mcp fx touch name=sub/.git", "done made"),
               "--json", cwd=root, home=normalize_home)
    finished = [e for e in json_lines(proc.stdout) if e["type"] == "action_finished"]
    # refused at the call by the write guard (both tiers), so nothing is left to undo
    assert [e["status"] for e in finished] == ["error"], proc.stderr
    assert "touch answered with an error" in str(finished[0]["error"]), finished[0]
    assert not (root / "sub" / ".git").exists()
