"""The environment a program gets: the parent's, minus credentials."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["is_secret_name", "scrub_env"]

_PROVIDERS = ("ANTHROPIC_", "OPENAI_", "AZURE_", "GEMINI_", "GOOGLE_API_KEY", "MISTRAL_",
              "GROQ_", "COHERE_", "DEEPSEEK_", "XAI_", "OPENROUTER_", "TOGETHER_", "FIREWORKS_",
              "PERPLEXITY_", "HUGGINGFACE", "HF_TOKEN", "REPLICATE_", "VOYAGE_")
_CLOUD = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                    "AWS_SECURITY_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_TOKEN",
                    "GH_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "DOCKER_PASSWORD"})
_SECRET_RE = re.compile(r"(?:_TOKEN$|SECRET|PASSWORD|PASSWD|_API_KEY$|^API_KEY$|_APIKEY$"
                        r"|PRIVATE_KEY|_CREDENTIALS?$|_ACCESS_KEY$)")


def is_secret_name(name: str) -> bool:
    """True for a variable that holds a provider key, a token, a password or a cloud secret."""
    upper = name.upper()
    return upper.startswith(_PROVIDERS) or upper in _CLOUD or bool(_SECRET_RE.search(upper))


def scrub_env(env: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` without secrets, except the names in `allow`."""
    keep = set(allow)
    return {k: v for k, v in env.items() if k in keep or not is_secret_name(k)}
