"""Which model a workflow's `llm` table names: `PROVIDER:MODEL` specs, and putting one in.

Light (the typed table and, when a spec is parsed, the provider registry's
names): a run that starts children, or `--model`, needs these without loading
the LLM driver and its providers.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from normalize.tables import LLMTable

if TYPE_CHECKING:
    from normalize.providers.base import ModelClient


class LLMSettings(LLMTable):
    """The `[workflow.llm]` table, checked, with the model specs it names."""

    @classmethod
    def of(cls, table: LLMTable | None) -> LLMSettings:
        """The settings of a workflow's typed table (the defaults when it has none)."""
        if table is None:
            return cls()
        return cls(**{f.name: getattr(table, f.name) for f in fields(table)})

    @property
    def spec(self) -> str:
        """`PROVIDER:MODEL` of the main model."""
        return qualify(self.model, self.provider)

    @property
    def fallback_specs(self) -> list[str]:
        return [qualify(m, self.spec.split(":", 1)[0]) for m in self.fallback]


def names_provider(model: str) -> bool:
    """Whether `model` is a whole `PROVIDER:MODEL` spec."""
    from normalize.providers.registry import PROVIDERS

    prefix, sep, _ = model.partition(":")
    return bool(sep) and prefix in PROVIDERS


def apply_model(llm: dict[str, Any], model: str | None, base_url: str | None = None) -> None:
    """Put a `PROVIDER:MODEL` spec and a base URL into a workflow's `llm` table."""
    from normalize.providers.registry import parse_spec

    if model:
        provider, name = parse_spec(model)
        if LLMSettings.from_config(llm).spec.split(":", 1)[0] != provider:
            # the workflow's bare fallback names belong to its own provider: drop them
            llm["fallback"] = [f for f in llm.get("fallback", []) if names_provider(f)]
        llm["provider"], llm["model"] = provider, name
    if base_url:
        llm["base_url"] = base_url


def qualify(model: str, provider: str) -> str:
    """`model` as a `PROVIDER:MODEL` spec: kept when it names a provider, else prefixed."""
    return model if names_provider(model) else f"{provider}:{model}"



class ScriptsKept:
    """A model factory that makes each `scripted:FILE` model once per run, so every driver of
    the run (each visit of an `llm-decide` step) plays on from where the last one stopped;
    other models are made anew for each driver, as without a factory."""

    def __init__(self) -> None:
        self.scripts: dict[str, ModelClient] = {}

    def __call__(self, spec: str, *, base_url: str | None = None, **opts: Any) -> ModelClient:
        from normalize.providers.registry import create_client

        if not spec.startswith("scripted:"):
            return create_client(spec, base_url=base_url, **opts)
        if spec not in self.scripts:  # (a resumed run: the first one made skips what was played)
            self.scripts[spec] = create_client(spec, base_url=base_url, **opts)
        return self.scripts[spec]


__all__ = ["LLMSettings", "ScriptsKept", "apply_model", "names_provider", "qualify"]
