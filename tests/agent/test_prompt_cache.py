"""A prefix that caches: marks where the model family caches, reads on the next turn, a key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import KEYS, Run

from normalize.providers import create_client
from normalize.providers.anthropic import min_cacheable_tokens
from normalize.providers.pricing import DEFAULT_TABLE
from normalize.testing.servers import FakeModelServer

RULES = "".join(f"- Rule {n}: keep functions short, typed and documented; test each change.\n"
                for n in range(90))  # about 1,700 tokens: past Sonnet 4.5's 1,024
SCRIPT = ["Looking.\nview calc.py", "Looking again.\nview calc.py:1-2", "done looked"]
MARK = {"type": "ephemeral"}


@pytest.fixture
def anthropic_env(server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    return server


def sdk_client(spec: str, **opts: Any) -> Any:
    """The real anthropic SDK from the first request on (not the httpx start-up path)."""
    return create_client(spec, **opts, **({"sdk": "always"} if spec.startswith("anthropic:")
                                          else {}))


def usage(server: FakeModelServer, run: Run) -> list[dict[str, int]]:
    replies = run.of("model_replied")
    assert len(replies) == len(server.requests)
    return [{"read": r["cache_read_tokens"], "write": r["cache_write_tokens"],
             "input": r["input_tokens"]} for r in replies]


def test_minimum_lengths_per_family() -> None:
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("claude-opus-4-1") == 1024
    assert min_cacheable_tokens("claude-opus-4-5") == 4096
    assert min_cacheable_tokens("claude-haiku-4-5") == 4096
    assert min_cacheable_tokens("claude-3-5-haiku-latest") == 2048


def test_the_stable_prefix_is_marked_and_read_on_the_second_request(
        repo: Path, anthropic_env: FakeModelServer, run_agent: Callable[..., Run]) -> None:
    server = anthropic_env
    server.add(*SCRIPT)
    run = run_agent(repo, llm={"model": "claude-sonnet-4-5", "system_prompt": RULES},
                    factory=sdk_client)
    assert run.outcome.status.value == "done"
    assert all(r.headers.get("x-stainless-lang") == "python" for r in server.requests)
    systems = [r.body["system"] for r in server.requests]
    assert all(s == systems[0] for s in systems)  # byte-identical on every turn
    assert systems[0][0]["cache_control"] == MARK
    # under task_tree the prompt is bounded: no moving breakpoint on the message
    assert all(isinstance(r.body["messages"][-1]["content"], str) for r in server.requests)
    first, second, third = usage(server, run)
    assert first["write"] > 1024 and first["read"] == 0
    assert second["read"] == first["write"] and second["write"] == 0
    assert third["read"] == first["write"]
    # cost at list price: cache reads at a tenth of input, the write at 1.25×
    task = run.outcome.task
    price = DEFAULT_TABLE.lookup("anthropic:claude-sonnet-4-5")
    assert price is not None
    assert task.usage.cache_read_tokens == 2 * first["write"]
    assert task.usage.cost_usd == pytest.approx(price.cost(task.usage), rel=1e-6)


def test_a_prefix_under_the_minimum_is_not_marked(
        repo: Path, anthropic_env: FakeModelServer, run_agent: Callable[..., Run]) -> None:
    server = anthropic_env
    server.add(*SCRIPT)
    # Haiku 4.5 caches from 4,096 tokens on; the rules are about 1,700
    run = run_agent(repo, llm={"model": "claude-haiku-4-5", "system_prompt": RULES},
                    factory=sdk_client)
    assert run.outcome.status.value == "done"
    assert all("cache_control" not in r.body["system"][0] for r in server.requests)
    assert all(u["read"] == 0 and u["write"] == 0 for u in usage(server, run))


def test_conversation_marks_the_newest_message(
        repo: Path, anthropic_env: FakeModelServer, run_agent: Callable[..., Run]) -> None:
    server = anthropic_env
    server.add(*SCRIPT)
    run = run_agent(repo, llm={"model": "claude-sonnet-4-5", "system_prompt": RULES},
                    context={"strategy": "conversation"}, factory=sdk_client)
    assert run.outcome.status.value == "done"
    for request in server.requests:
        *earlier, newest = request.body["messages"]
        assert newest["role"] == "user"
        assert newest["content"][-1]["cache_control"] == MARK
        assert all(isinstance(m["content"], str) for m in earlier)  # the breakpoint moves
    first, second, third = usage(server, run)
    assert first["read"] == 0 and first["write"] > 0
    # each turn reads what the turn before wrote (the earlier newest message included)
    assert second["read"] == first["write"]
    assert third["read"] == second["read"] + second["write"] > second["read"]


def test_openai_sends_a_stable_prompt_cache_key(
        repo: Path, server: FakeModelServer, run_agent: Callable[..., Run],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    server.add(*SCRIPT)
    run = run_agent(repo, llm={"provider": "openai", "model": "gpt-4.1-mini",
                               "system_prompt": RULES})
    assert run.outcome.status.value == "done"
    keys = {r.body.get("prompt_cache_key") for r in server.requests}
    assert keys == {run.outcome.task.id}
    reads = [u["read"] for u in usage(server, run)]
    assert reads[0] == 0 and reads[1] >= 1024 and reads[1] % 128 == 0
