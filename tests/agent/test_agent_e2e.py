"""End to end: a model (a fake server, driven by the real SDK or httpx) fixes a type error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import BROKEN, FIX_SCRIPT, KEYS, cli, json_lines, mypy_passes

from normalize.testing.servers import FakeModelServer


def turn_texts(server: FakeModelServer) -> list[str]:
    """The text of the last message of each request the server received."""
    return [request.last_message for request in server.requests]


def assert_fed_back(prompts: list[str]) -> None:
    """Each turn's request holds what the previous turn's action produced."""
    assert len(prompts) == 4
    assert 'return add(xs[0], "1") / len(xs)' in prompts[1]  # view calc.py, line numbered
    assert "6│" in prompts[1]
    assert '+    return add(xs[0], 1) / len(xs)' in prompts[2]  # the edit's diff
    assert "Success: no issues found" in prompts[3]  # mypy's verdict
    assert "Success" not in prompts[2] and "+    return" not in prompts[1]


def test_anthropic_sdk_fixes_the_type_error(repo: Path, server: FakeModelServer, run_agent: Any,
                                            venv_path: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert mypy_passes(repo).returncode == 1  # the sample really is broken
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(*FIX_SCRIPT)
    # the project's instructions make the stable prefix long enough to cache (Sonnet 4.5: 1,024)
    (repo / "AGENTS.md").write_text("".join(
        f"- Convention {n}: annotate every function, keep modules small, test each fix.\n"
        for n in range(60)))
    run = run_agent(repo)  # no factory: the driver makes its own client from the environment

    assert run.outcome.status.value == "done", run.outcome.error
    assert run.outcome.summary.startswith("Fixed the type error in calc.py")
    server.assert_done()
    assert {r.api for r in server.requests} == {"anthropic"}
    assert {r.model for r in server.requests} == {"claude-sonnet-4-5"}
    assert_fed_back(turn_texts(server))
    # the system prompt is the same on every turn, marked for prompt caching, and read back
    systems = [r.system for r in server.requests]
    assert all(s == systems[0] for s in systems)
    assert systems[0][0]["cache_control"] == {"type": "ephemeral"}
    assert "## How to reply" in systems[0][0]["text"] and str(repo) in systems[0][0]["text"]
    # the file is really fixed, and mypy really passes
    assert (repo / "calc.py").read_text() == BROKEN.replace('"1"', "1")
    assert mypy_passes(repo).returncode == 0
    # usage from the provider, priced
    usage = run.outcome.task.usage
    assert usage.requests == 4 and usage.input_tokens > 0 and usage.cache_read_tokens > 0
    assert usage.cost_usd > 0
    replies = run.of("model_replied")
    assert [r["text"] for r in replies] == FIX_SCRIPT
    assert all(r["model"] == "anthropic:claude-sonnet-4-5" for r in replies)


def test_openai_compatible_server_fixes_the_type_error(repo: Path, server: FakeModelServer,
                                                       run_agent: Any, venv_path: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    server.add(*FIX_SCRIPT)
    run = run_agent(repo, llm={"provider": "openai", "model": "gpt-4.1-mini"})

    assert run.outcome.status.value == "done", run.outcome.error
    server.assert_done()
    assert {r.api for r in server.requests} == {"openai"}
    assert {r.model for r in server.requests} == {"gpt-4.1-mini"}
    assert all(r.headers["authorization"] == "Bearer sk-test" for r in server.requests)
    assert_fed_back(turn_texts(server))
    assert mypy_passes(repo).returncode == 0
    assert run.outcome.task.usage.cost_usd > 0


def test_the_agent_command_fixes_it_through_the_cli(repo: Path, server: FakeModelServer,
                                                    tmp_path: Path) -> None:
    server.add(*FIX_SCRIPT)
    home = tmp_path / "home"
    done = cli("agent", "fix the type error", "--json", "--model", "anthropic:claude-sonnet-4-5",
               cwd=repo, home=home,
               env={"ANTHROPIC_BASE_URL": server.url, **KEYS})

    assert done.returncode == 0, done.stderr
    events = json_lines(done.stdout)
    task_id = events[0]["task_id"]
    assert done.stderr.splitlines()[0] == f"task {task_id}"  # printed at the start
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_ended"
    assert events[-1]["status"] == "done" and events[-1]["exit_code"] == 0
    assert "Fixed the type error" in events[-1]["summary"]
    kinds = [e["type"] for e in events]
    assert "text_delta" in kinds  # streamed to the renderer (not journaled)
    assert kinds.count("model_replied") == 4
    server.assert_done()
    assert_fed_back(turn_texts(server))
    assert mypy_passes(repo).returncode == 0
    journal = (home / "tasks" / f"{task_id}.jsonl").read_text()
    assert "text_delta" not in journal and "model_replied" in journal
