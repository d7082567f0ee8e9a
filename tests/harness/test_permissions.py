"""normalize's approval policy answers Claude Code's permission prompts (its
`--permission-prompt-tool`, served by normalize over MCP inside the sandbox): a command the
person's deny patterns refuse is refused to Claude Code as well, with the reason."""

from __future__ import annotations

from pathlib import Path

from harness_support import HarnessSite, checkout_under, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


def bash(command: str) -> Reply:
    return Reply("Running.", tools=(ToolUse("Bash", {"command": command, "description": "x"}),))


def denying_rm(tmp_path: Path) -> HarnessSite:
    site = make_site(tmp_path, "claude")
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text('[permissions]\ndeny = ["rm *"]\n')
    site.env["NORMALIZE_CONFIG"] = str(config)
    return site


def assert_rm_is_refused(site: HarnessSite) -> None:
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


def test_a_denied_command_is_refused_to_claude_by_normalizes_policy(tmp_path: Path) -> None:
    assert_rm_is_refused(denying_rm(tmp_path))


def test_the_permission_server_starts_when_normalize_is_a_checkout_under_tmp(
        tmp_path: Path) -> None:
    """The sandbox empties /tmp; the server's interpreter still reads normalize's package."""
    site = denying_rm(tmp_path)
    site.python = checkout_under(tmp_path)
    assert_rm_is_refused(site)


def test_a_normalize_package_in_the_workspace_does_not_replace_the_server(
        tmp_path: Path) -> None:
    """Claude Code starts the server in the workspace: a project called normalize (or one the
    model wrote) must not be imported in place of normalize's own."""
    site = denying_rm(tmp_path)
    shadow = site.ws / "normalize"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    assert_rm_is_refused(site)
