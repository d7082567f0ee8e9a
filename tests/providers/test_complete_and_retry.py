"""`complete` (retries, fallbacks, cancel) with in-process models, and RetryPolicy."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from normalize.cancel import CancelToken
from normalize.errors import ConfigError, ProviderError
from normalize.providers import (
    ModelEvent,
    ModelRequest,
    ProviderStatusError,
    TextDelta,
    TurnCancelledError,
    complete,
    parse_retry_after,
)
from normalize.retry import RetryPolicy
from normalize.testing import ScriptedModel

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)
REQUEST = ModelRequest(system="s", messages=[{"role": "user", "content": "go"}])


class TruncatingModel:
    """A model whose stream stops after some text, without a Completed event."""

    name = "truncating"
    model = "cut-1"

    def __init__(self) -> None:
        self.calls = 0

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        self.calls += 1
        yield TextDelta("half a rep")


def test_a_stream_without_completed_is_a_retryable_failure() -> None:
    model = TruncatingModel()
    with pytest.raises(ProviderError) as info:
        complete(model, REQUEST, retry=FAST)
    assert model.calls == 3
    assert info.value.retryable
    assert "gave up after 3 attempts" in str(info.value)
    assert "10 characters" in str(info.value)


def test_truncated_primary_falls_back_and_partial_text_never_returns() -> None:
    backup = ScriptedModel(["whole reply"], model="backup")
    result = complete(TruncatingModel(), REQUEST, retry=FAST, fallbacks=[backup])
    assert result.text == "whole reply"
    assert backup.requests[0].model == "backup"


def test_retryable_errors_then_success() -> None:
    model = ScriptedModel(
        [ProviderError("overloaded", retryable=True), ProviderError("again", retryable=True), "ok"]
    )
    attempts: list[int] = []
    result = complete(model, REQUEST, retry=FAST, on_retry=lambda a, _d, _r: attempts.append(a))
    assert result.text == "ok"
    assert attempts == [2, 3]
    model.assert_done()


def test_non_retryable_error_skips_retries_and_fallbacks() -> None:
    backup = ScriptedModel([])
    model = ScriptedModel([ProviderStatusError("bad request", status=400)])
    with pytest.raises(ProviderStatusError, match="bad request"):
        complete(model, REQUEST, retry=FAST, fallbacks=[backup])
    assert backup.requests == []


def test_strategy_none_makes_one_attempt() -> None:
    model = ScriptedModel([ProviderError("busy", retryable=True), "never played"])
    with pytest.raises(ProviderError, match="busy"):
        complete(model, REQUEST, retry=RetryPolicy(strategy="none"))
    assert model.remaining == 1


def test_long_retry_after_moves_to_the_fallback_at_once() -> None:
    slow = ScriptedModel([ProviderStatusError("429", status=429, retry_after=600, retryable=True)])
    backup = ScriptedModel(["quick"], model="backup")
    reasons: list[str] = []
    result = complete(
        slow, REQUEST, retry=FAST, fallbacks=[backup], on_fallback=lambda *a: reasons.append(a[2])
    )
    assert result.text == "quick"
    assert "600 s" in reasons[0]


def test_cancelled_before_start() -> None:
    cancel = CancelToken()
    cancel.cancel()
    model = ScriptedModel(["unused"])
    with pytest.raises(TurnCancelledError):
        complete(model, REQUEST, cancel=cancel)


def test_exponential_delays_double_and_cap() -> None:
    policy = RetryPolicy(strategy="exponential", max_attempts=6, base_delay=0.5, max_delay=3.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.attempts == 6


def test_fixed_and_none_strategies() -> None:
    assert RetryPolicy(strategy="fixed", base_delay=2.0).delay(5) == 2.0
    none = RetryPolicy(strategy="none", max_attempts=5)
    assert (none.delay(1), none.attempts) == (0.0, 1)


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(base_delay=4.0, max_delay=4.0, jitter=0.5)
    rng = random.Random(7)
    delays = [policy.delay(1, rng=rng) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 100


def test_retry_policy_from_config() -> None:
    policy = RetryPolicy.from_config({"strategy": "fixed", "max_attempts": 2, "base_delay": 1})
    assert policy == RetryPolicy(strategy="fixed", max_attempts=2, base_delay=1.0)
    with pytest.raises(ConfigError, match="unknown retry key 'tries'"):
        RetryPolicy.from_config({"tries": 3})
    with pytest.raises(ConfigError, match="strategy"):
        RetryPolicy.from_config({"strategy": "linear"})
    with pytest.raises(ConfigError, match="max_attempts"):
        RetryPolicy.from_config({"max_attempts": "3"}, file="wf.toml")


def test_parse_retry_after_seconds_and_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(90.0)
    earlier = format_datetime(now - timedelta(seconds=5), usegmt=True)
    assert parse_retry_after(earlier, now=now.timestamp()) == 0.0
