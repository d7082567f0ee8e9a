"""Must-show 2 (CI mode: a tool without a read-only hint is blocked; --approve yes runs it) and
`tasks show` / `help commands` with MCP servers configured, through the real CLI."""

from __future__ import annotations

from pathlib import Path

from mcp_helpers import cli, fixture_server, json_lines, script, write_config


def _finished(out: str) -> list[dict[str, object]]:
    return [e for e in json_lines(out) if e["type"] == "action_finished"]


def test_ci_blocks_a_tool_its_server_does_not_mark_read_only_and_yes_runs_it(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    write_config(normalize_home, fixture_server("fx", timeout=20))
    replies = ("Echo first, then create the file.\nmcp fx echo text=hello times=2\n"
               "mcp fx touch name=made.txt", "done tried")
    proc = cli("agent", "go", "--model", script(tmp_path / "a.json", *replies), "--json",
               cwd=root, home=normalize_home)
    finished = _finished(proc.stdout)
    assert [e["status"] for e in finished] == ["success", "blocked"], proc.stderr
    assert "hello hello" in str(finished[0]["preview"])  # read-only hint: runs in auto
    error = str(finished[1]["error"])
    assert "refused `mcp fx touch name=made.txt`" in error
    assert "its MCP server does not mark it read-only" in error
    assert "--approve yes" in error
    assert not (root / "made.txt").exists()

    proc = cli("agent", "go", "--approve", "yes", "--model",
               script(tmp_path / "b.json", "mcp fx touch name=made.txt", "done made"),
               "--json", cwd=root, home=normalize_home)
    assert [e["status"] for e in _finished(proc.stdout)] == ["success"], proc.stderr
    assert (root / "made.txt").read_text() == "touched\n"  # the sandbox lets it write here

    shown = cli("tasks", "show", "last", cwd=root, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    assert "mcp fx touch name=made.txt" in shown.stdout


def test_help_commands_lists_the_configured_servers_tools(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    write_config(normalize_home, fixture_server("fx", timeout=20))
    proc = cli("help", "commands", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert "mcp SERVER TOOL key=value" in proc.stdout  # the verb
    assert "mcp fx echo text=STRING [times=INTEGER]: Echo the text back" in proc.stdout
    assert "mcp fx touch name=STRING: Create a file" in proc.stdout
