"""Provider faults during an agent run, as the task's outcome and journal record them.

The real anthropic SDK talks to the fake server; retries use tiny delays
(except where the server asks for a `retry-after`, which is honoured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import KEYS

from normalize.retry import RetryPolicy
from normalize.testing.servers import FakeModelServer, Fault


@pytest.fixture
def anthropic_env(server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    return server


def test_529_then_success(repo: Path, anthropic_env: FakeModelServer, run_agent: Any) -> None:
    anthropic_env.add(Fault.status(529), "done nothing to do")
    run = run_agent(repo)

    assert run.outcome.status.value == "done"
    assert run.outcome.summary == "nothing to do"
    [retried] = run.of("model_retried")
    assert retried["attempt"] == 2 and "529" in retried["reason"]
    assert "overloaded" in retried["reason"]
    assert [e["attempt"] for e in run.of("model_requested")] == [1, 2]
    assert [r["text"] for r in run.of("model_replied")] == ["done nothing to do"]
    assert run.outcome.task.usage.requests == 1
    anthropic_env.assert_done()


def test_429_honours_retry_after(repo: Path, anthropic_env: FakeModelServer,
                                 run_agent: Any) -> None:
    anthropic_env.add(Fault.status(429, retry_after=0.3), "done ok")
    run = run_agent(repo)

    assert run.outcome.status.value == "done"
    [retried] = run.of("model_retried")
    assert retried["delay"] == 0.3  # the server's wait, not the policy's 0.01 s
    assert "429" in retried["reason"]
    first, second = anthropic_env.requests
    assert second.at - first.at >= 0.3


def test_cut_stream_is_a_failed_turn_and_never_a_reply(repo: Path,
                                                       anthropic_env: FakeModelServer,
                                                       run_agent: Any) -> None:
    anthropic_env.add(Fault.cut_stream("view calc.py\nrun rm -rf"), "done clean")
    run = run_agent(repo)

    assert run.outcome.status.value == "done" and run.outcome.summary == "clean"
    [retried] = run.of("model_retried")
    assert "message_stop" in retried["reason"]
    assert [r["text"] for r in run.of("model_replied")] == ["done clean"]
    # the partial reply never became a decision: nothing ran
    assert run.of("action_started") == []
    [decision] = run.of("decision_made")
    assert decision["actions"] == [] and decision["done"]
    # the streamed partial text did reach watchers, followed by the retry that voids it
    kinds = [e.type for e in run.events]
    assert kinds.index("text_delta") < kinds.index("model_retried")


def test_error_event_mid_stream(repo: Path, anthropic_env: FakeModelServer,
                                run_agent: Any) -> None:
    anthropic_env.add(Fault.error_event("view ca", error_type="overloaded_error"), "done ok")
    run = run_agent(repo)

    assert run.outcome.status.value == "done"
    [retried] = run.of("model_retried")
    assert "overloaded_error" in retried["reason"]
    assert [r["text"] for r in run.of("model_replied")] == ["done ok"]
    assert run.of("action_started") == []


def test_retries_exhausted_then_the_fallback_answers(repo: Path, anthropic_env: FakeModelServer,
                                                     run_agent: Any) -> None:
    anthropic_env.add(Fault.status(529), Fault.status(500), Fault.status(529))
    anthropic_env.add("done answered by haiku", model="claude-haiku-4-5")
    run = run_agent(repo, llm={"fallback": ["claude-haiku-4-5"]})

    assert run.outcome.status.value == "done", run.outcome.error
    assert run.outcome.summary == "answered by haiku"
    assert [e["attempt"] for e in run.of("model_retried")] == [2, 3]
    [fallback] = run.of("fallback_used")
    assert fallback["from_model"] == "claude-sonnet-4-5"
    assert fallback["to_model"] == "claude-haiku-4-5"
    assert "529" in fallback["reason"]
    [reply] = run.of("model_replied")
    assert reply["model"] == "anthropic:claude-haiku-4-5"
    assert [r.model for r in anthropic_env.requests] == ["claude-sonnet-4-5"] * 3 + \
        ["claude-haiku-4-5"]
    anthropic_env.assert_done()


def test_every_model_failing_fails_the_task_resumably(repo: Path, anthropic_env: FakeModelServer,
                                                      run_agent: Any) -> None:
    anthropic_env.add(*[Fault.status(529)] * 2)
    anthropic_env.add(*[Fault.status(503)] * 2, model="claude-haiku-4-5")
    run = run_agent(repo, llm={"fallback": ["claude-haiku-4-5"]},
                    options={"model_retry": RetryPolicy(max_attempts=2, base_delay=0.01)})

    assert run.outcome.status.value == "failed"
    assert run.outcome.exit_status == 1
    assert "every model failed" in (run.outcome.error or "")
    assert run.of("model_replied") == [] and run.outcome.task.turn == 0
    assert run.outcome.task.status.resumable
    # resumed once the provider is back, the task carries on where it stood
    anthropic_env.add("done back again")
    again = run_agent(repo, task_id=run.outcome.task.id, resume=True)
    assert again.outcome.status.value == "done" and again.outcome.summary == "back again"


def test_a_retry_after_beyond_60_seconds_is_a_clear_failure(repo: Path,
                                                             anthropic_env: FakeModelServer,
                                                             run_agent: Any) -> None:
    anthropic_env.add(Fault.status(429, retry_after=3600))
    run = run_agent(repo)

    assert run.outcome.status.value == "failed"
    assert "3600" in (run.outcome.error or "") and "60" in (run.outcome.error or "")
    assert run.of("model_retried") == []
