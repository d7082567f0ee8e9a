"""Replies run whole or not at all: a body that never closes runs nothing from its command on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_helpers import Run, scripted

from normalize.errors import UsageError
from normalize.intents import parse, parse_command, rejection

UNCLOSED = "write x.py: the heredoc <<EOF is never closed (no line `EOF`)"
NOT_RUN = "this command and the rest of the reply did not run"


@pytest.mark.parametrize("reply", [
    "view a.py\nwrite x.py <<EOF\nprint(1)\nrun touch pwned\n",
    "view a.py\n```bash\nwrite x.py <<EOF\nprint(1)\n```\nrun touch pwned\n",
])
def test_an_unclosed_heredoc_is_rejected_and_ends_the_reply(reply: str) -> None:
    parsed = parse(reply)
    assert [(a.tool, a.args) for a in parsed.actions] == [("view", ["a.py"]), ("write", ["x.py"])]
    write = parsed.actions[1]
    assert write.body is None
    assert rejection(write) == f"{UNCLOSED}; {NOT_RUN}"
    assert rejection(parsed.actions[0]) is None
    assert "pwned" not in parsed.thinking


def test_an_unclosed_fence_is_rejected() -> None:
    parsed = parse("edit a.py\n```\nx = 1\nrun touch pwned\n")
    assert [a.tool for a in parsed.actions] == ["edit"]
    assert rejection(parsed.actions[0]) == \
        f"edit a.py: the fenced body is never closed (no closing ``` line); {NOT_RUN}"


def test_an_unclosed_done_does_not_end_the_task() -> None:
    parsed = parse("done Fixed it <<EOF\nsee calc.py\n")
    assert not parsed.done
    assert [a.tool for a in parsed.actions] == ["done"]
    assert "never closed" in (rejection(parsed.actions[0]) or "")


def test_a_closed_heredoc_is_not_rejected() -> None:
    parsed = parse("write x.py <<EOF\nprint(1)\nEOF\nview x.py")
    assert [rejection(a) for a in parsed.actions] == [None, None]
    assert parsed.actions[0].body == "print(1)\n"


def test_a_typed_or_workflow_command_with_an_unclosed_body_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        parse_command("write x.py <<EOF\nprint(1)")
    assert str(caught.value) == UNCLOSED


def test_the_agent_runs_what_came_before_and_nothing_from_the_unclosed_command_on(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    (repo / "a.py").write_text("A = 1\n")
    model, factory = scripted("Looking, then writing.\nview a.py\nwrite x.py <<EOF\n"
                              "print(1)\nrun touch pwned\n",
                              "done stopped")
    run = run_agent(repo, factory=factory, approve="yes")
    assert run.outcome.status.value == "done", run.outcome.error
    assert not (repo / "x.py").exists() and not (repo / "pwned").exists()
    finished = run.of("action_finished")
    assert [(e["tool"], e["status"]) for e in finished] == [("view", "success"),
                                                            ("write", "error")]
    assert finished[1]["error"] == f"{UNCLOSED}; {NOT_RUN}"
    told = model.requests[1].messages[-1]["content"]
    assert f"{UNCLOSED}; {NOT_RUN}" in told
    assert "A = 1" in told  # the view before it ran
