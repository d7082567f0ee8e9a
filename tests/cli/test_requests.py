"""Each launching command's flag rules, in-process: the combination and the one line it gives.

Every row of every table in `normalize.cli.requests.RULES` is met by a case here
(the last test says so), so a row deleted or changed fails a case.
"""

from __future__ import annotations

import pytest

from normalize.cli.requests import (
    RULES,
    Agent,
    Answer,
    Batch,
    FollowUp,
    Fork,
    HandOver,
    Launch,
    Resume,
    Rewind,
    Run,
)
from normalize.errors import UsageError

NETWORK = "--network and --no-network contradict each other; give one"
TWO_WAYS = "are two ways to resume; give one (--fork takes --rewind N for where the fork starts)"

MODEL_DRIVERS = "--driver llm, claude, codex, aider (a driver a model drives)"

REFUSED: list[tuple[Launch, str]] = [
    (Run(workflow="w", network=("*",), no_network=True), NETWORK),
    (Agent(task="t", network=("pypi.org",), no_network=True), NETWORK),
    (Resume(task="t", network=("*",), no_network=True), NETWORK),
    (Batch(workflow="w", items="i", network=("*",), no_network=True), NETWORK),
    (Agent(task=" ", items="items.jsonl"),
     "TASK is empty: say what the agent should do with each item"),
    (Agent(task="t", budget=0), "--budget 0: must be more than 0 (USD)"),
    (Agent(task="t", items="i", item_budget=-1), "--item-budget -1: must be more than 0 (USD)"),
    (Agent(task="t", pick="pytest"), "--pick goes with --attempts N"),
    (Agent(task="t", model="a:x,b:y"), "--model a:x,b:y: several models go with --attempts N"),
    (Agent(task="t", attempts=1), "--attempts 1: choose 2 to 8"),
    (Agent(task="t", attempts=9), "--attempts 9: choose 2 to 8"),
    (Agent(task="t", attempts=2, pick="  "),
     "--pick is empty: give the command that judges each attempt"),
    (Resume(task="t", in_place=True), "--in-place goes with --fork"),
    (Resume(task="last", store="s3://b/p"),
     "resume --store needs a task id or BATCH/N: `last` is this data home's"),
    (Resume.of("t", rewind=2, in_place=True), "--in-place goes with --fork"),
    (Resume.of("t", instruction="go on", answer="yes"),
     f"a follow-up INSTRUCTION and --answer {TWO_WAYS}"),
    (Resume.of("t", fork=True, driver="user"), f"--fork and --driver {TWO_WAYS}"),
    (Resume.of("t", rewind=1, answer="no"), f"--rewind and --answer {TWO_WAYS}"),
    (Resume.of("t", driver="user", model="scripted:s.json"),
     f"--model goes with {MODEL_DRIVERS}, not --driver user"),
    (Resume.of("t", driver="workflow", base_url="http://127.0.0.1:9"),
     f"--base-url goes with {MODEL_DRIVERS}, not --driver workflow"),
    (Batch(workflow="w", items="i", budget=-2.5), "--budget -2.5: must be more than 0 (USD)"),
    (Batch(workflow="w", items="i", item_budget=0),
     "--item-budget 0: must be more than 0 (USD)"),
]

ACCEPTED: list[Launch] = [
    Run(workflow="w", network=("*",)),
    Agent(task="t", attempts=3, pick="pytest -q", model="a:x,b:y"),
    Agent(task="t", items="i", attempts=1, pick=""),  # a batch: --attempts is not read
    Agent(task="", budget=1.5),  # TASK may still come from a prompt
    Resume.of("t", fork=True, rewind=3, in_place=True),
    Resume.of("t", driver="llm", model="scripted:s.json"),
    Resume.of("t", model="scripted:s.json"),
    Resume.of("t", no_network=True),
    Resume.of("ab12cd34/3", store="s3://bucket/prefix"),
    Batch(workflow="w", items="i", budget=1, item_budget=0.5),
]


def _refusal(request: Launch) -> str | None:
    try:
        request.check()
    except UsageError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("request_", "line"), REFUSED,
                         ids=[f"{type(r).__name__}-{n}" for n, (r, _) in enumerate(REFUSED)])
def test_each_rule_refuses_its_combination_with_its_line(request_: Launch, line: str) -> None:
    assert _refusal(request_) == line


@pytest.mark.parametrize("request_", ACCEPTED, ids=[type(r).__name__ for r in ACCEPTED])
def test_flags_that_go_together_pass(request_: Launch) -> None:
    assert _refusal(request_) is None


def test_a_resume_goes_on_in_one_way() -> None:
    assert Resume.of("t").way is None
    assert Resume.of("t", instruction="more").way == FollowUp("more")
    assert Resume.of("t", fork=True, rewind=4, in_place=True).way == Fork(4, in_place=True)
    assert Resume.of("t", rewind=4).way == Rewind(4)
    assert Resume.of("t", driver="user").way == HandOver("user")
    assert Resume.of("t", driver="user").driver == "user"
    assert Resume.of("t", answer="teal").way == Answer("teal")


def test_every_row_of_every_table_is_met_by_a_case() -> None:
    met: set[tuple[type[Launch], int]] = set()
    for request, _ in REFUSED:
        for index, rule in enumerate(RULES[type(request)]):
            if rule.when(request):
                met.add((type(request), index))
                break
    every = {(kind, index) for kind, rules in RULES.items() for index in range(len(rules))}
    assert every - met == set()


def test_a_request_is_frozen() -> None:
    request = Run(workflow="w")
    with pytest.raises(AttributeError):
        request.workflow = "other"  # type: ignore[misc]
