"""What a model's tokens cost, in USD per million tokens.

Prices are list prices at the time of writing and change; a config file can
override or add models (`PriceTable.merged`). A model missing from the table
costs 0.0 and is reported as unpriced, so budgets never fail on it silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol

from normalize.errors import ConfigError


class TokenCounts(Protocol):
    """Anything with the four token counts (`UsageReport`, `task.Usage`)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...


@dataclass(frozen=True)
class Price:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: TokenCounts) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000


def _anthropic(inp: float, out: float) -> Price:
    """Anthropic prices: cache reads at 10% of input, 5-minute cache writes at 125%."""
    return Price(inp, out, round(inp * 0.1, 6), round(inp * 1.25, 6))


def _openai(inp: float, out: float, cached: float) -> Price:
    """OpenAI prices: caching is automatic, so a cache write costs plain input."""
    return Price(inp, out, cached, inp)


FREE = Price(0.0, 0.0, 0.0, 0.0)

DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-6": _anthropic(5.0, 25.0),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4-0": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-6": _anthropic(3.0, 15.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4-0": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-4.1": _openai(2.0, 8.0, 0.50),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4o": _openai(2.50, 10.0, 1.25),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "o3": _openai(2.0, 8.0, 0.50),
    "o4-mini": _openai(1.10, 4.40, 0.275),
}

FREE_PROVIDERS = frozenset({"ollama", "scripted", "replay"})
"""Providers whose models run locally or not at all: priced at zero, and known, unless a
price is given for the model itself (`[workflow.llm.prices]`: a test prices scripted usage)."""

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def normalize_model(model: str) -> str:
    """The table key for a model name: no provider prefix, no date or `-latest` suffix."""
    name = model.strip().lower()
    if ":" in name:
        prefix, rest = name.split(":", 1)
        if prefix.isidentifier():
            name = rest
    return _DATE_SUFFIX.sub("", name)


@dataclass(frozen=True)
class CostEstimate:
    """A cost and whether it rests on a known price."""

    usd: float
    known: bool


class PriceTable:
    """A price per model, with lookups that ignore provider prefixes and date suffixes."""

    def __init__(self, prices: Mapping[str, Price] | None = None, *,
                 chosen: frozenset[str] = frozenset()) -> None:
        self._prices = {normalize_model(k): v for k, v in (prices or DEFAULT_PRICES).items()}
        self._chosen = chosen  # models priced by the configuration (`merged`)
        self.unpriced: set[str] = set()

    def lookup(self, model: str) -> Price | None:
        """The price of `model`, or None when the table does not know it."""
        provider = model.split(":", 1)[0].lower() if ":" in model else ""
        key = normalize_model(model)
        if provider in FREE_PROVIDERS and key not in self._chosen:
            return FREE
        return self._prices.get(key)

    def estimate(self, model: str, usage: TokenCounts) -> CostEstimate:
        """The cost of `usage` on `model`; an unknown model costs 0.0 and is remembered."""
        price = self.lookup(model)
        if price is None:
            self.unpriced.add(model)
            return CostEstimate(0.0, False)
        return CostEstimate(price.cost(usage), True)

    def cost(self, model: str, usage: TokenCounts) -> float:
        return self.estimate(model, usage).usd

    def merged(self, overrides: Mapping[str, Any], *, file: str | None = None) -> PriceTable:
        """A new table with `overrides` (model → {input, output, cache_read, cache_write})."""
        prices = dict(self._prices)
        for model, spec in overrides.items():
            prices[normalize_model(model)] = _price_from_config(
                model, spec, prices.get(normalize_model(model)), file
            )
        chosen = self._chosen | {normalize_model(model) for model in overrides}
        return PriceTable(prices, chosen=chosen)


def _price_from_config(model: str, spec: Any, base: Price | None, file: str | None) -> Price:
    if isinstance(spec, Price):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"price of {model!r} must be a table of USD per million tokens", file=file
        )
    names = [f.name for f in fields(Price)]
    values: dict[str, float] = {}
    for key, value in spec.items():
        if key not in names:
            raise ConfigError(
                f"unknown price key {key!r} for {model!r} (expected {', '.join(names)})", file=file
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigError(f"price {key} of {model!r} must be a non-negative number", file=file)
        values[key] = float(value)
    if base is None:
        if "input" not in values or "output" not in values:
            raise ConfigError(f"price of new model {model!r} needs input and output", file=file)
        values.setdefault("cache_read", values["input"])
        values.setdefault("cache_write", values["input"])
        return Price(**values)
    return Price(**{name: values.get(name, getattr(base, name)) for name in names})


DEFAULT_TABLE = PriceTable()


def cost(model: str, usage: TokenCounts, *, table: PriceTable | None = None) -> float:
    """USD spent by `usage` on `model` (0.0 for a model the table does not know)."""
    return (table or DEFAULT_TABLE).cost(model, usage)


def is_priced(model: str, *, table: PriceTable | None = None) -> bool:
    """Whether the price table knows `model`."""
    return (table or DEFAULT_TABLE).lookup(model) is not None
