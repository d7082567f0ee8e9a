"""Fixtures for the provider tests: a fake model server and clients pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from normalize.providers import ModelClient, ModelRequest, close_client, create_client
from normalize.retry import RetryPolicy
from normalize.testing.servers import FakeModelServer

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-test"}


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
    assert fake.errors == []


@pytest.fixture
def fast() -> RetryPolicy:
    """A retry policy with tiny delays, so fault tests stay fast."""
    return RetryPolicy(strategy="exponential", max_attempts=3, base_delay=0.01, max_delay=0.02)


@pytest.fixture
def request_() -> ModelRequest:
    return ModelRequest(
        system="You are a terse assistant working on a codebase.",
        messages=[{"role": "user", "content": "fix the failing test"}],
        max_tokens=512,
    )


@pytest.fixture
def make_client(server: FakeModelServer) -> Iterator[Callable[..., ModelClient]]:
    """Build clients aimed at the fake server; they are closed after the test."""
    made: list[Any] = []

    def make(spec: str, **opts: Any) -> ModelClient:
        base = server.openai_url if not spec.startswith("anthropic:") else server.url
        client = create_client(spec, base_url=base, env=KEYS, **opts)
        made.append(client)
        return client

    yield make
    for client in made:
        close_client(client)
