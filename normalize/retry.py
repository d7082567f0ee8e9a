"""How long to wait before trying again: shared by workflow steps and model calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from normalize.errors import ConfigError

if TYPE_CHECKING:
    import random

Strategy = Literal["none", "fixed", "exponential"]
STRATEGIES: tuple[Strategy, ...] = ("none", "fixed", "exponential")


@dataclass(frozen=True)
class RetryPolicy:
    """When and how often to try again.

    `max_attempts` counts every attempt, the first included; the `none`
    strategy always makes exactly one. `jitter` is the fraction of each delay
    drawn at random: a delay `d` becomes a value in `[d * (1 - jitter), d]`, so
    many clients that failed together do not come back together.
    """

    strategy: Strategy = "exponential"
    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"retry strategy must be one of {', '.join(STRATEGIES)}")
        if self.max_attempts < 1:
            raise ConfigError("retry max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigError("retry delays must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError("retry jitter must be between 0 and 1")

    @property
    def attempts(self) -> int:
        """How many attempts in all this policy allows."""
        return 1 if self.strategy == "none" else self.max_attempts

    def delay(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if self.strategy == "none":
            return 0.0
        if self.strategy == "fixed":
            base = self.base_delay
        else:
            base = self.base_delay * 2.0 ** max(attempt - 1, 0)
        base = min(base, self.max_delay)
        if self.jitter:
            import random  # (a wait is rare; random is not loaded at every start)

            base *= 1.0 - self.jitter * (rng or random).random()
        return base

    @classmethod
    def from_config(cls, data: Mapping[str, Any], *, file: str | None = None) -> RetryPolicy:
        """Build a policy from a `[workflow.retry]`-style table, rejecting unknown keys."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(f"unknown retry key {key!r}", file=file)
        values: dict[str, Any] = dict(data)
        for key in ("base_delay", "max_delay", "jitter"):
            if key in values:
                value = values[key]
                if isinstance(value, bool) and key == "jitter":
                    value = 0.25 if value else 0.0
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ConfigError(f"retry {key} must be a number", file=file)
                values[key] = float(value)
        attempts = values.get("max_attempts", 1)
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise ConfigError("retry max_attempts must be an integer", file=file)
        try:
            return cls(**values)
        except ConfigError as err:
            raise ConfigError(err.text, file=file) from None


NO_RETRY = RetryPolicy(strategy="none", max_attempts=1)
