"""The environment a program gets: the parent's, minus credentials and the ways to reach agents.

The agent and session variables name sockets (ssh-agent, gpg-agent, D-Bus, Docker,
the display server, the terminal multiplexer) through which a program could sign
with the person's keys, run containers, or type into the person's windows and
terminal. `DISPLAY` goes too: an X server accepts synthetic key presses from any
client it lets in. `XDG_RUNTIME_DIR` goes because the sandbox empties it.

Names are not enough: `DATABASE_URL=postgres://app:PASSWORD@db/app`, a token in
`OTEL_RESOURCE_ATTRIBUTES` or an OTLP endpoint with `user:password@` carry a
credential under an innocent name. A value goes whatever its name when the
redactor (`normalize.redact`, the same shapes the journal hides) finds a secret in
it: a URL's password, a provider token, an `Authorization` value, `token=…`.
The variables that say where a credential store was moved (`KUBECONFIG`,
`DOCKER_CONFIG`, … `normalize.sandbox.credentials`) go too: the sandbox hides
those places, and a program need not be told where they are.

`scrub_env` is the one function every environment normalize builds for a program
or a hook goes through; `env_allow` names what the person passes on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from normalize.redact import default_redactor
from normalize.sandbox.credentials import RELOCATING

__all__ = ["AGENT_SOCKETS", "carries_secret", "is_secret_name", "scrub_env"]

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
_SECRET_RE = re.compile(r"(?:_TOKEN$|SECRET|PASSWORD|PASSWD|PASSPHRASE|_PWD$|_API_KEY$"
                        r"|^API_KEY$|_APIKEY$|PRIVATE_KEY|_CREDENTIALS?$|_ACCESS_KEY$"
                        r"|(?:^|_)AUTH$|_DSN$|CONNECTION_STRING"
                        r"|^OTEL_EXPORTER_OTLP_(?:[A-Z]+_)?HEADERS$)")  # a tracing backend's key


def is_secret_name(name: str) -> bool:
    """True for a variable that holds a provider key, a token, a password or a cloud secret."""
    upper = name.upper()
    return upper.startswith(_PROVIDERS) or upper in _CLOUD or bool(_SECRET_RE.search(upper))


def carries_secret(value: str) -> bool:
    """True for a value holding a credential by its shape (a URL's password, a token)."""
    return default_redactor().redact(value) != value


def _dropped(name: str, value: str) -> bool:
    return (is_secret_name(name) or name in AGENT_SOCKETS or name in RELOCATING
            or carries_secret(value))


def scrub_env(env: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` without secrets (by name or by value), agent sockets and the variables
    that relocate credential stores, except the names in `allow`."""
    keep = set(allow)
    return {k: v for k, v in env.items() if k in keep or not _dropped(k, v)}

