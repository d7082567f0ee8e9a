"""Text stays as written: `done`, `ask` and `note` keep their quotes and spacing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_helpers import Run, scripted

from normalize.intents import parse, parse_command

SUMMARY = 'add(total, "0") passed a str'
QUESTION = "Use  'sqlite' or \"postgres\"? It's your call."
NOTE = 'mean() must  stay "pure"; don\'t touch add'


@pytest.mark.parametrize(("line", "args"), [
    (f"done {SUMMARY}", [SUMMARY]),
    (f"ask {QUESTION}", [QUESTION]),
    (f"note {NOTE}", [NOTE]),
    (f"note --turns 3 {NOTE}", ["--turns", "3", NOTE]),
    ('plan fix "mean";  add a test', ['fix "mean";  add a test']),
])
def test_text_verbs_keep_their_text(line: str, args: list[str]) -> None:
    assert parse_command(line).args == args
    parsed = parse(line)
    if line.startswith("done"):
        assert parsed.done and parsed.summary == SUMMARY
    else:
        assert parsed.actions[0].args == args


def test_path_verbs_still_split_like_a_shell() -> None:
    assert parse_command('run echo "a  b" c').args == ["echo", "a  b", "c"]


def test_the_agents_done_summary_is_recorded_exactly(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    _, factory = scripted(f"done {SUMMARY}")
    run = run_agent(repo, factory=factory)
    assert run.outcome.summary == SUMMARY
    assert run.store.load(run.outcome.task.id).summary == SUMMARY
    assert run.of("run_ended")[-1]["summary"] == SUMMARY


def test_the_agents_question_and_note_are_kept_exactly(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    model, factory = scripted(f"note {NOTE}", f"ask {QUESTION}")
    run = run_agent(repo, factory=factory)
    assert run.outcome.status.value == "waiting"
    assert run.store.load(run.outcome.task.id).pending.question == QUESTION  # type: ignore[union-attr]
    assert run.of("waiting_for_input")[-1]["question"] == QUESTION
    assert f"- {NOTE}" in model.requests[1].messages[-1]["content"]
