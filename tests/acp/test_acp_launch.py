"""What an ACP agent gets to reach its model (normalize/tools/harness/agents.py): the harness
it is built on decides, as for a harness turn; an agent normalize does not know gets a home."""

from __future__ import annotations

from pathlib import Path

import pytest

from normalize.sandbox import SandboxPolicy
from normalize.tools.harness.agents import TMPDIR, acp_launch, agent_harness


@pytest.mark.parametrize(("argv", "harness"), [
    (["/opt/bin/claude-code-acp"], "claude"),
    (["claude-agent-acp", "--debug"], "claude"),
    (["npx", "@zed-industries/codex-acp@0.16.0"], "codex"),
    (["node", "/x/node_modules/@zed-industries/claude-code-acp/dist/index.js"], "claude"),
    (["gemini", "--acp"], None),
    (["python", "my-claude-code-acp-fork.py"], None),
])
def test_the_agent_is_known_by_its_program(argv: list[str], harness: str | None) -> None:
    assert agent_harness(argv) == harness


def test_a_claude_agent_gets_what_a_claude_turn_gets(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    env, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["claude-code-acp"],
                                "http://models.test:8080", None)
    home = tmp_path / "acp"
    assert home.is_dir() and str(home) in policy.writable
    assert env["HOME"] == str(home) and env["CLAUDE_CONFIG_DIR"] == str(home / ".claude")
    assert env["ANTHROPIC_BASE_URL"] == "http://models.test:8080"
    assert env["IS_SANDBOX"] == "1" and env["CLAUDE_CODE_TMPDIR"] == TMPDIR
    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", *env} <= set(policy.env_allow)
    assert policy.hosts == ("models.test",)
    # no base URL: the harness's default API host, through the proxy
    _, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["claude-agent-acp"], None, None)
    assert policy.hosts == ("api.anthropic.com",)


def test_a_codex_agent_gets_its_model_provider(tmp_path: Path) -> None:
    env, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["codex-acp"],
                                "http://models.test:9/v1", None)
    assert env["CODEX_HOME"] == str(tmp_path / "acp")
    assert 'base_url = "http://models.test:9/v1"' in (tmp_path / "acp" / "config.toml").read_text()
    assert "OPENAI_API_KEY" in policy.env_allow and policy.hosts == ("models.test",)


def test_an_unknown_agent_gets_a_home_and_its_model_host_only(tmp_path: Path) -> None:
    env, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["my-agent"],
                                "http://models.test:1", None)
    assert env == {"HOME": str(tmp_path / "acp")}
    assert policy.hosts == ("models.test",) and "ANTHROPIC_API_KEY" not in policy.env_allow
    _, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["my-agent"], None, None)
    assert policy.hosts == ()


def test_gemini_cli_gets_its_base_url_keys_and_a_shell_without_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_GEMINI_BASE_URL", raising=False)
    for argv in (["gemini", "--acp"], ["npx", "@google/gemini-cli@0.61.0", "--acp"]):
        env, policy, _ = acp_launch(SandboxPolicy(), tmp_path, argv, "http://models.test:2",
                                    None)
        assert env == {"HOME": str(tmp_path / "acp"),
                       "GOOGLE_GEMINI_BASE_URL": "http://models.test:2"}
        assert {"GEMINI_API_KEY", "GOOGLE_API_KEY", *env} <= set(policy.env_allow)
        assert policy.hosts == ("models.test",)
    settings = tmp_path / "acp" / ".gemini" / "settings.json"
    assert '"enableInteractiveShell": false' in settings.read_text()
    settings.write_text("{}\n")  # the agent's own settings, once it has some, are kept
    _, policy, _ = acp_launch(SandboxPolicy(), tmp_path, ["gemini"], None, None)
    assert settings.read_text() == "{}\n"
    assert policy.hosts == ("generativelanguage.googleapis.com",)  # no base URL: Google's
