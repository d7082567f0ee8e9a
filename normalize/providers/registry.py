"""Providers by name, and `create_client` for `PROVIDER:MODEL` specs.

A provider is a factory `factory(model, *, base_url, env, **opts) -> ModelClient`
registered under a name. The built-in factories import their module (and so
their HTTP stack) only when called, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from normalize.errors import UsageError
from normalize.providers.base import ModelClient


class ProviderFactory(Protocol):
    """Builds a ModelClient for one model."""

    def __call__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        env: Mapping[str, str] | None = None,
        **opts: Any,
    ) -> ModelClient: ...


def _anthropic(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    from normalize.providers.anthropic import create

    return create(model, base_url=base_url, env=env, **opts)


def _openai(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    from normalize.providers.openai_compat import create

    return create(model, base_url=base_url, env=env, **opts)


def _ollama(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    from normalize.providers.openai_compat import create_ollama

    return create_ollama(model, base_url=base_url, env=env, **opts)


def _scripted(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    from normalize.providers.scripted import create

    return create(model, base_url=base_url, env=env, **opts)


def _replay(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    from normalize.providers.replay import create

    return create(model, base_url=base_url, env=env, **opts)


PROVIDERS: dict[str, ProviderFactory] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "ollama": _ollama,
    "scripted": _scripted,
    "replay": _replay,
}
"""Registered providers; plugins add theirs with `register_provider`."""

_GUESSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("claude-",), "anthropic"),
    (("gpt-", "chatgpt-", "o1", "o3", "o4"), "openai"),
)


def register_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Register `factory` under `name`; refuses to shadow an existing name unless `replace`."""
    if not replace and name in PROVIDERS and PROVIDERS[name] is not factory:
        raise UsageError(f"provider {name!r} is already registered")
    PROVIDERS[name] = factory


def parse_spec(spec: str) -> tuple[str, str]:
    """Split `PROVIDER:MODEL` (or guess the provider of a bare model name)."""
    spec = spec.strip()
    if not spec:
        raise UsageError("no model given; write PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5")
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in PROVIDERS:
        if not rest:
            raise UsageError(f"no model after {prefix!r}; write {prefix}:MODEL")
        return prefix, rest
    for starts, provider in _GUESSES:
        if spec.startswith(starts):
            return provider, spec
    known = ", ".join(sorted(PROVIDERS))
    raise UsageError(f"cannot tell which provider serves {spec!r}; write PROVIDER:MODEL ({known})")


def create_client(
    spec: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ModelClient:
    """A ModelClient for `spec`: `anthropic:claude-sonnet-4-5`, `ollama:llama3.1`, `gpt-4o` ..."""
    provider, model = parse_spec(spec)
    return PROVIDERS[provider](model, base_url=base_url, env=env, **opts)
