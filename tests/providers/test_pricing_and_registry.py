"""Prices per model, and `create_client` spec parsing and the provider registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from normalize.errors import ConfigError, UsageError
from normalize.providers import (
    PROVIDERS,
    ModelClient,
    PriceTable,
    UsageReport,
    cost,
    create_client,
    is_priced,
    parse_spec,
    register_provider,
)
from normalize.task import Usage
from normalize.testing import ScriptedModel

MILLION = UsageReport(
    input_tokens=1_000_000,
    output_tokens=1_000_000,
    cache_read_tokens=1_000_000,
    cache_write_tokens=1_000_000,
)


def test_cost_of_known_models() -> None:
    assert cost("claude-sonnet-4-5", UsageReport(input_tokens=1_000_000)) == 3.0
    assert cost("claude-sonnet-4-5", MILLION) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert cost("anthropic:claude-haiku-4-5-20251001", MILLION) == pytest.approx(1 + 5 + 0.1 + 1.25)
    assert cost("claude-opus-4-1", UsageReport(output_tokens=1000)) == pytest.approx(0.075)
    assert cost("gpt-4o-mini-2024-07-18", UsageReport(input_tokens=2_000_000)) == 0.30
    # task.Usage has the same four counts and is priced the same way.
    assert cost("gpt-4o", Usage(input_tokens=1_000_000)) == 2.5


def test_unknown_models_cost_nothing_and_are_flagged() -> None:
    table = PriceTable()
    estimate = table.estimate("mystery-model", MILLION)
    assert (estimate.usd, estimate.known) == (0.0, False)
    assert table.unpriced == {"mystery-model"}
    assert not is_priced("mystery-model")
    assert is_priced("ollama:llama3.1") and cost("ollama:llama3.1", MILLION) == 0.0


def test_price_overrides_from_config() -> None:
    table = PriceTable().merged(
        {"claude-sonnet-4-5": {"input": 2.0}, "my-model": {"input": 1.0, "output": 2.0}}
    )
    assert table.cost("claude-sonnet-4-5", UsageReport(input_tokens=1_000_000)) == 2.0
    assert table.cost("claude-sonnet-4-5", UsageReport(output_tokens=1_000_000)) == 15.0
    assert table.cost("my-model", MILLION) == 1.0 + 2.0 + 1.0 + 1.0
    with pytest.raises(ConfigError, match="unknown price key 'inputs'"):
        PriceTable().merged({"x": {"inputs": 1}})


def test_a_local_model_is_free_unless_the_configuration_prices_it() -> None:
    table = PriceTable().merged({"scripted:child": {"input": 1.0, "output": 2.0}})
    assert table.cost("scripted:child", MILLION) == 1.0 + 2.0 + 1.0 + 1.0
    assert table.cost("scripted:other", MILLION) == 0.0 and table.unpriced == set()
    assert table.cost("scripted:gpt-4o", MILLION) == 0.0  # the default table prices no script
    with pytest.raises(ConfigError, match="needs input and output"):
        PriceTable().merged({"new-model": {"input": 1}})


def test_parse_spec() -> None:
    assert parse_spec("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_spec("claude-haiku-4-5") == ("anthropic", "claude-haiku-4-5")
    assert parse_spec("gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert parse_spec("o4-mini") == ("openai", "o4-mini")
    assert parse_spec("ollama:qwen2.5-coder:7b") == ("ollama", "qwen2.5-coder:7b")
    with pytest.raises(UsageError, match="cannot tell which provider"):
        parse_spec("llama3.1:8b")
    with pytest.raises(UsageError, match="no model after 'openai'"):
        parse_spec("openai:")


def test_register_a_provider() -> None:
    made: list[str] = []

    def factory(
        model: str,
        *,
        base_url: str | None = None,
        env: Mapping[str, str] | None = None,
        **opts: Any,
    ) -> ModelClient:
        made.append(model)
        return ScriptedModel(["hi"], model=model)

    register_provider("echo", factory)
    try:
        client = create_client("echo:small")
        assert made == ["small"] and client.model == "small"
        with pytest.raises(UsageError, match="already registered"):
            register_provider("echo", lambda model, **kw: ScriptedModel())
    finally:
        del PROVIDERS["echo"]
