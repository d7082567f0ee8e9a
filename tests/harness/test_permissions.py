"""normalize's approval policy answers Claude Code's permission prompts (its
`--permission-prompt-tool`, served by normalize over MCP inside the sandbox): a command the
person's deny patterns refuse is refused to Claude Code as well, with the reason."""

from __future__ import annotations

from pathlib import Path

from harness_support import make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


def bash(command: str) -> Reply:
    return Reply("Running.", tools=(ToolUse("Bash", {"command": command, "description": "x"}),))


def test_a_denied_command_is_refused_to_claude_by_normalizes_policy(tmp_path: Path) -> None:
    site = make_site(tmp_path, "claude")
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text('[permissions]\ndeny = ["rm *"]\n')
    site.env["NORMALIZE_CONFIG"] = str(config)
    script = [bash("rm check.py"), bash("python3 -c 'print(40 + 2)'"), Reply("Gave up on rm.")]
    with FakeModelServer(script) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "claude", "--json",
                                "--base-url", site.base_url(port), "clean up")
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    assert (site.ws / "check.py").exists()
    refused, allowed = of_type(events, "harness_tool_finished")
    assert not refused["ok"]
    assert "refused `rm check.py`: it matches the deny pattern 'rm *'" in refused["output"]
    assert allowed["ok"] and allowed["output"].strip() == "42"
