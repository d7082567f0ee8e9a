"""The environment a program gets: the parent's, minus credentials and the ways to reach agents.

The agent and session variables name sockets (ssh-agent, gpg-agent, D-Bus, Docker,
the display server, the terminal multiplexer) through which a program could sign
with the person's keys, run containers, or type into the person's windows and
terminal. `DISPLAY` goes too: an X server accepts synthetic key presses from any
client it lets in. `XDG_RUNTIME_DIR` goes because the sandbox empties it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["AGENT_SOCKETS", "is_secret_name", "scrub_env"]

_PROVIDERS = ("ANTHROPIC_", "OPENAI_", "AZURE_", "GEMINI_", "GOOGLE_API_KEY", "MISTRAL_",
              "GROQ_", "COHERE_", "DEEPSEEK_", "XAI_", "OPENROUTER_", "TOGETHER_", "FIREWORKS_",
              "PERPLEXITY_", "HUGGINGFACE", "HF_TOKEN", "REPLICATE_", "VOYAGE_")
_CLOUD = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                    "AWS_SECURITY_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_TOKEN",
                    "GH_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "DOCKER_PASSWORD"})
AGENT_SOCKETS = frozenset({
    "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS", "DOCKER_HOST", "CONTAINER_HOST", "XDG_RUNTIME_DIR",
    "WAYLAND_DISPLAY", "DISPLAY", "XAUTHORITY", "KRB5CCNAME", "TMUX", "TMUX_PANE", "STY",
    "SWAYSOCK", "I3SOCK", "HYPRLAND_INSTANCE_SIGNATURE", "KITTY_LISTEN_ON", "NVIM",
    "NVIM_LISTEN_ADDRESS", "PULSE_SERVER", "PIPEWIRE_REMOTE", "GNOME_KEYRING_CONTROL",
    "VSCODE_IPC_HOOK_CLI"})
"""Variables naming a socket or session that leads outside the sandbox."""
_SECRET_RE = re.compile(r"(?:_TOKEN$|SECRET|PASSWORD|PASSWD|_API_KEY$|^API_KEY$|_APIKEY$"
                        r"|PRIVATE_KEY|_CREDENTIALS?$|_ACCESS_KEY$"
                        r"|^OTEL_EXPORTER_OTLP_(?:[A-Z]+_)?HEADERS$)")  # a tracing backend's key


def is_secret_name(name: str) -> bool:
    """True for a variable that holds a provider key, a token, a password or a cloud secret."""
    upper = name.upper()
    return upper.startswith(_PROVIDERS) or upper in _CLOUD or bool(_SECRET_RE.search(upper))


def scrub_env(env: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` without secrets and agent sockets, except the names in `allow`."""
    keep = set(allow)
    return {k: v for k, v in env.items()
            if k in keep or not (is_secret_name(k) or k in AGENT_SOCKETS)}
