"""Context strategies: what each prompt shows, bounds, subtasks, notes, compaction."""

from __future__ import annotations

import json

import pytest

from normalize.errors import ConfigError
from normalize.execution.context import CONTEXTS, make_context, register_context
from normalize.execution.context.base import ContextStrategy
from normalize.execution.context.conversation import ConversationContext
from normalize.execution.context.plans import TaskTreeContext
from normalize.execution.context.results import signature
from normalize.task import Action, ActionResult

GOAL = "make the tests pass"


def action(text: str) -> Action:
    tool, *args = text.split()
    return Action(tool, {"args": args}, text=text)


def feed(ctx: ContextStrategy, turns: int, *, output_lines: int = 8) -> None:
    """`turns` turns of one reply and one result each, every result distinct."""
    for turn in range(turns):
        ctx.add_reply(f"step {turn}\nview f{turn}.py", f"step {turn}", turn)
        output = "\n".join(f"{n:>4}│ line {n} of file {turn}" for n in range(output_lines))
        ctx.add_result(action(f"view f{turn}.py"), ActionResult.success(output), turn)


def prompt(ctx: ContextStrategy, turn: int) -> str:
    return "\n".join(m["content"] for m in ctx.build(GOAL, turn).messages)


def test_registry_and_factory() -> None:
    assert set(CONTEXTS) >= {"task_tree", "task_list", "flat", "conversation", "none"}
    assert isinstance(make_context(), TaskTreeContext)
    assert make_context("flat", max_results=2).max_results == 2
    assert make_context(strategy="conversation").name == "conversation"
    with pytest.raises(ConfigError, match="unknown context strategy 'deep'"):
        make_context("deep")
    with pytest.raises(ConfigError, match="unknown context option 'depth'"):
        make_context("flat", depth=3)
    with pytest.raises(ConfigError, match="max_results must be an integer of at least 1"):
        make_context("flat", max_results=0)

    class Mine(TaskTreeContext):
        name = "mine"

    register_context("mine", Mine)
    try:
        assert make_context("mine").name == "mine"
        with pytest.raises(ConfigError, match="already registered"):
            register_context("mine", TaskTreeContext)
    finally:
        del CONTEXTS["mine"]


@pytest.mark.parametrize("name", ["task_tree", "task_list", "flat", "none"])
def test_bounded_strategies_do_not_grow_with_turns(name: str) -> None:
    ctx = make_context(name)
    feed(ctx, 20)  # past max_history (12) and max_results (5): the state is full
    at_20 = len(prompt(ctx, 20))
    state_20 = len(json.dumps(ctx.snapshot()))
    feed(ctx, 500)
    assert len(prompt(ctx, 500)) <= at_20 * 1.1
    assert len(json.dumps(ctx.snapshot())) <= state_20 * 1.1
    assert ctx.bounded


def test_conversation_accumulates_every_message() -> None:
    ctx = make_context("conversation", compact_after_chars=0)
    feed(ctx, 5)
    messages = ctx.build(GOAL, 5).messages
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "user"] * 5
    assert messages[0]["content"].startswith("# Task\nmake the tests pass")
    assert all(f"line 3 of file {t}" in messages[2 + 2 * t]["content"] for t in range(5))
    feed(ctx, 30)
    assert len(prompt(ctx, 30)) > 4 * len(prompt(ConversationContext(), 0))
    assert not ctx.bounded


def test_task_tree_shows_goal_history_lines_and_the_last_results() -> None:
    ctx = make_context("task_tree", max_history=4)
    feed(ctx, 10)
    text = prompt(ctx, 10)
    assert text.startswith("# Task\nmake the tests pass")
    assert "## Earlier actions (6 older not shown)" in text
    for turn in (6, 7, 8):  # one line per earlier action: the last ones kept
        assert f"{turn + 1}. ✓ view f{turn}.py → 0│ line 0 of file {turn}" in text
    assert "view f5.py" not in text  # older than the kept lines
    assert "## Results of your last commands\n### `view f9.py` ✓" in text
    assert "line 7 of file 9" in text and "line 7 of file 8" not in text
    assert "## Your last message\nstep 9" in text


def test_flat_shows_the_last_n_results_and_no_history() -> None:
    ctx = make_context("flat", max_results=3)
    feed(ctx, 10)
    text = prompt(ctx, 10)
    assert [f"view f{t}.py" in text for t in range(10)] == [False] * 7 + [True] * 3
    assert "Earlier actions" not in text


def test_none_shows_the_goal_and_feedback_only() -> None:
    ctx = make_context("none")
    first = prompt(ctx, 0)
    feed(ctx, 5)
    assert prompt(ctx, 5) == first
    ctx.add_feedback("your reply held no command")
    assert "your reply held no command" in prompt(ctx, 5)


def test_errors_and_exit_codes_reach_the_model() -> None:
    ctx = make_context()
    result = ActionResult.failure("exit status 1", output="calc.py:6: error: bad arg",
                                  exit_code=1)
    ctx.add_result(action("run mypy calc.py"), result, 0)
    text = prompt(ctx, 1)
    assert "### `run mypy calc.py` ✗ exit 1" in text
    assert "error: exit status 1" in text and "calc.py:6: error: bad arg" in text


def test_long_results_are_clipped_with_where_to_find_the_rest() -> None:
    ctx = make_context(result_chars=500)
    ctx.add_result(action("view big.py"), ActionResult.success("x" * 5000, cache_id="r3"), 0)
    text = prompt(ctx, 1)
    assert "(fetch r3)" in text and "x" * 600 not in text
    ctx.add_result(action("fetch r3"), ActionResult.success("y\n" * 3000), 1)
    assert "(clipped; `fetch r3 START-END` shows a range of lines)" in prompt(ctx, 2)


def test_notes_live_for_their_turns_or_their_subtask() -> None:
    ctx = make_context("task_tree")
    ctx.add_note("the API is v2", 2, turn=0)
    ctx.add_note("tests live in tests/", None, turn=0)
    assert "- the API is v2" in prompt(ctx, 1) and "- the API is v2" in prompt(ctx, 2)
    assert "the API is v2" not in prompt(ctx, 3)
    assert "- tests live in tests/" in prompt(ctx, 50)
    ctx.add_plan(["fix parser", "fix printer"])
    ctx.add_note("parser uses regexes", None, turn=3)
    assert "parser uses regexes" in prompt(ctx, 4)
    ctx.close_subtask("parser fixed")
    text = prompt(ctx, 5)
    assert "parser uses regexes" not in text  # its subtask ended
    assert "tests live in tests/" in text  # the task's note lives on


def test_plan_and_done_walk_the_task_tree() -> None:
    ctx = make_context("task_tree")
    assert ctx.close_subtask("all done") is None  # no plan: done ends the task
    assert ctx.add_plan(["read the code", "fix the bug", "run the tests"]) == \
        "now on subtask: read the code"
    assert ctx.in_subtask
    text = prompt(ctx, 1)
    assert "## Where you are\n  - read the code  ← current" in text
    assert "Still open here: fix the bug; run the tests" in text
    ctx.add_plan(["find the parser", "read its tests"])  # a nested plan
    assert "    - find the parser  ← current" in prompt(ctx, 2)
    assert ctx.close_subtask("found in src/p.py") == \
        "closed subtask: find the parser; now on: read its tests"
    assert ctx.close_subtask("read") == "closed subtask: read its tests; now on: read the code"
    assert ctx.close_subtask("understood") == \
        "closed subtask: read the code; now on: fix the bug"
    assert "Done at this level: read the code: understood" in prompt(ctx, 3)
    ctx.close_subtask("fixed")
    message = ctx.close_subtask("green")
    assert message is not None and "every subtask is done" in message
    assert not ctx.in_subtask
    assert ctx.close_subtask("finished") is None  # now done ends the task


def test_task_list_shows_the_whole_checklist() -> None:
    ctx = make_context("task_list")
    ctx.add_plan(["read", "fix", "test"])
    ctx.close_subtask("read it")
    text = prompt(ctx, 2)
    assert "## Subtasks\n[x] read — read it\n[>] fix\n[ ] test" in text


def test_plans_are_only_results_under_flat_and_conversation() -> None:
    for name in ("flat", "conversation", "none"):
        ctx = make_context(name)
        assert ctx.add_plan(["a", "b"]) == ""
        assert ctx.close_subtask("x") is None


def test_plans_are_bounded() -> None:
    ctx = make_context("task_tree")
    message = ctx.add_plan([f"step {n}" for n in range(100)])
    assert "40 dropped" in message
    assert "at most 60 subtasks" in ctx.add_plan(["one more"])
    assert len(ctx.root.walk()) == 61  # the task and 60 subtasks


def test_snapshot_round_trips_through_json() -> None:
    for name in CONTEXTS:
        ctx = make_context(name)
        feed(ctx, 6)
        ctx.add_note("keep", None, 6)
        ctx.add_plan(["a", "b"])
        ctx.add_feedback("careful")
        state = json.loads(json.dumps(ctx.snapshot()))
        again = make_context(name)
        again.restore(state)
        assert prompt(again, 7) == prompt(ctx, 7)


def test_compaction_is_deterministic_and_keeps_fetch_ids() -> None:
    def run() -> tuple[list[dict[str, str]], object]:
        ctx = make_context("conversation", compact_after_chars=4000)
        ctx.marker = "0" * 16  # each task has its own random marker; fix it to compare
        compactions = []
        for turn in range(12):
            ctx.add_reply(f"view f{turn}.py", "", turn)
            output = "\n".join(f"line {n} of f{turn}" for n in range(60))
            ctx.add_result(action(f"view f{turn}.py"),
                           ActionResult.success(output, cache_id=f"r{turn + 1}"), turn)
            built = ctx.build(GOAL, turn + 1)
            if built.compaction is not None:
                compactions.append(built.compaction)
        return built.messages, compactions

    first, compactions = run()
    second, again = run()
    assert first == second and compactions == again  # same input, same prompt
    assert compactions, "the threshold was crossed, so something was compacted"
    c = compactions[0]
    assert c.after_chars < c.before_chars and c.results_compacted >= 1
    text = "\n".join(m["content"] for m in first)
    assert "… compacted (60 lines); fetch r1 for the full text" in text
    assert "line 59 of f11" in text and "line 59 of f10" in text  # recent ones kept whole
    assert "line 59 of f0" not in text
    assert [m["role"] for m in first][:3] == ["user", "assistant", "user"]


def test_signature_ignores_durations_but_not_outcomes() -> None:
    a = action("test")
    one = signature(a, ActionResult.success("3 passed in 0.42s"))
    assert one == signature(a, ActionResult.success("3 passed in 1.07s"))
    assert one != signature(a, ActionResult.success("2 passed, 1 failed in 0.4s"))
    assert one != signature(action("test tests/"), ActionResult.success("3 passed in 0.42s"))
