"""What an ACP agent (the `acp` driver's) gets to reach its model, as a harness does.

An ACP agent built on a harness — Zed's `claude-code-acp` / `claude-agent-acp` on Claude
Code, `codex-acp` on Codex — reads the same variables and home as that harness. So it is
given the same things the harness tool gives a harness turn, by the harness's own adapter
(`key_variables`, `env`, `prepare`) and the same `turn_policy`: its API key variables
through the environment scrub, a home of its own under the task's harness state
(writable, kept between runs), its model server's base URL, and that server's host as the
proxy's only host. An agent on no harness that normalize knows (Gemini CLI) gets its home,
its key variables and its model server's base URL in the variable it reads; an agent
normalize does not know gets its home and, with a base URL, that host; nothing else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from normalize.errors import ToolError
from normalize.sandbox import SandboxPolicy
from normalize.tools.harness.base import TurnRequest
from normalize.tools.harness.registry import harness_named
from normalize.tools.harness.tool import installed, model_host, turn_policy

__all__ = ["ACP_AGENTS", "TESTED", "acp_launch", "agent_harness"]

ACP_AGENTS: dict[str, str] = {
    "claude-code-acp": "claude",
    "claude-agent-acp": "claude",
    "codex-acp": "codex",
}
"""An ACP agent's program (its file name) → the harness whose model settings it reads."""

@dataclass(frozen=True)
class OwnAgent:
    """An ACP agent on no harness normalize knows: how it is told its model server."""

    base_url: str
    """The variable it reads its model server's base URL from."""
    keys: tuple[str, ...]
    """Its API key variables (let through the environment scrub)."""
    host: str
    """Its model server's host when no base URL is given."""
    files: tuple[tuple[str, str], ...] = ()
    """Files its home gets when it has none (path in the home, text)."""


OWN_MODELS: dict[str, OwnAgent] = {
    "gemini": OwnAgent("GOOGLE_GEMINI_BASE_URL", ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                       "generativelanguage.googleapis.com",
                       ((".gemini/settings.json",
                         '{"tools": {"shell": {"enableInteractiveShell": false}}}\n'),))}
"""Such agents by program name. Gemini CLI (`gemini --acp`): a base URL makes it speak to
that server (its "gateway" sign-in, a key or not); its shell runs commands without a
pseudo-terminal, which the sandbox does not give (node-pty's `forkpty` fails there)."""

TESTED: dict[str, str] = {"@zed-industries/claude-code-acp": "0.16.2",
                          "@zed-industries/claude-agent-acp": "0.23.1",
                          "@zed-industries/codex-acp": "0.16.0",
                          "@google/gemini-cli": "0.61.0"}
"""The ACP agents normalize's tests run as drivers (npm package → version; `scripts/test`
installs them under `.ci/harnesses`)."""

BASE_URLS = {"claude": "ANTHROPIC_BASE_URL", "codex": "OPENAI_BASE_URL"}
"""Where the model server is named when the task names none (as for the harness drivers)."""

TMPDIR = "$TMPDIR"
"""A variable's value that the `acp` driver replaces with the agent's own temp directory."""

AGENT_ENV: dict[str, dict[str, str]] = {
    "claude": {"IS_SANDBOX": "1", "CLAUDE_CODE_TMPDIR": TMPDIR}}
"""What an agent built on the harness is told beside the harness's own variables: Claude
Code refuses to start as root with its permission bypass allowed (which its ACP agent always
allows, and never selects unless asked) unless it is told it runs in a sandbox, as it does;
and the Claude Code its ACP agent bundles puts its shell's files under `/tmp/claude-UID`
unless `CLAUDE_CODE_TMPDIR` says where (the sandbox gives it a temp directory of its own)."""

ASKS: dict[str, tuple[str, str]] = {
    "codex": ('approval_policy = "never"', 'approval_policy = "untrusted"')}
"""How an agent built on the harness is made to ask before it acts (its settings' line, as
the harness writes it, and as the agent gets it): `codex-acp` then asks its client
`session/request_permission` before each command it does not count as safe, so normalize's
approval policy judges its commands (the harness itself runs with no questions)."""

HOME = "acp"
"""The agent's home, in the task's harness state."""


def agent_harness(argv: list[str]) -> str | None:
    """The harness the agent `argv` starts is built on (`npx @zed-industries/codex-acp` and
    `node …/claude-code-acp/dist/index.js` count), or None."""
    for word in argv:
        for part in reversed(Path(word).parts):
            name = part.split("@", 1)[0] if not part.startswith("@") else part
            if name in ACP_AGENTS:
                return ACP_AGENTS[name]
    return None


def _own_models(argv: list[str]) -> OwnAgent | None:
    """How the agent `argv` (Gemini CLI: `gemini`, `npx @google/gemini-cli`) is told its
    model server, or None."""
    for word in argv:
        for name in OWN_MODELS:
            if Path(word).name == name or word.split("@")[1:2] == [f"google/{name}-cli"]:
                return OWN_MODELS[name]
    return None


def _give(home: Path, files: tuple[tuple[str, str], ...]) -> None:
    """Write each of `files` into the agent's home unless it is there (the person's own
    settings, or the agent's, are kept)."""
    for name, text in files:
        path = home / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.write_text(text)


def acp_launch(policy: SandboxPolicy, state_dir: Path | None, argv: list[str],
               base_url: str | None, model: str | None
               ) -> tuple[dict[str, str], SandboxPolicy, list[str]]:
    """The variables normalize sets for the agent `argv`, its sandbox, and the paths it must
    read where the sandbox empties /tmp (its install)."""
    if state_dir is None:
        raise ToolError("acp: this run has no state directory for the agent's home")
    home = state_dir / HOME
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    visible = [installed(argv[0])] if Path(argv[0]).is_absolute() else []
    name = agent_harness(argv)
    if name is None:
        env = {"HOME": str(home)}
        keys: tuple[str, ...] = ()
        own = _own_models(argv)
        hosts = policy.hosts
        if own is not None:
            keys = own.keys
            base_url = base_url or os.environ.get(own.base_url) or None
            if base_url:
                env[own.base_url] = base_url
            elif not policy.network:
                hosts = hosts if own.host in hosts else (*hosts, own.host)
            _give(home, own.files)
        if base_url and not policy.network:
            host = model_host(base_url, "acp")
            hosts = hosts if host in hosts else (*hosts, host)
        return env, replace(policy, writable=(*policy.writable, str(home)), hosts=hosts,
                            env_allow=(*policy.env_allow, *env, *keys)), visible
    env, policy = _on_harness(name, policy, home, base_url, model)
    return env, policy, visible


def _on_harness(name: str, policy: SandboxPolicy, home: Path, base_url: str | None,
                model: str | None) -> tuple[dict[str, str], SandboxPolicy]:
    """What an agent built on the harness `name` gets: the harness's settings in its home
    (made to ask first, `ASKS`), its variables, its sandbox."""
    harness = harness_named(name)
    base_url = base_url or os.environ.get(BASE_URLS[name]) or None
    request = TurnRequest(prompt="", home=home, model=model, base_url=base_url)
    harness.prepare(request)
    if name in ASKS:
        _ask_first(home / "config.toml", *ASKS[name])
    env = {**harness.env(request), **AGENT_ENV.get(name, {})}
    return env, turn_policy(policy, harness, home, model_host(base_url, name), env)


def _ask_first(settings: Path, written: str, asking: str) -> None:
    """The agent's settings, with the line that makes it ask first (`ASKS`)."""
    text = settings.read_text(encoding="utf-8")
    if written not in text:
        raise ToolError(f"acp: {settings} does not say {written!r}; normalize cannot make "
                        f"the agent ask before it acts")
    settings.write_text(text.replace(written, asking, 1), encoding="utf-8")
