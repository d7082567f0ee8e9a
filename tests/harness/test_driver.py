"""The harness driver's decisions, without a harness: what each turn is told and when the
task ends (the engine and the CLIs are exercised in the other files here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from normalize.cancel import CancelToken
from normalize.contract.driver import DriverServices, LineQueue, RunContext, create_driver
from normalize.drivers.harness import HarnessDriver
from normalize.events import BaseEvent
from normalize.task import ActionResult, Decision, Limits, ResultStatus, Task, TaskStatus


def setup(tmp_path: Path, name: str = "claude", **config: Any
          ) -> tuple[HarnessDriver, Task, RunContext, LineQueue]:
    inbox = LineQueue()
    driver = create_driver(name, config, DriverServices(inbox=inbox))
    assert isinstance(driver, HarnessDriver)
    task = Task.new(goal="fix add", workspace=str(tmp_path), driver=name,
                    limits=Limits(max_cost_usd=1.0))
    seen: list[BaseEvent] = []

    def emit(event: BaseEvent, *, durable: bool = False) -> BaseEvent:
        seen.append(event)
        return event

    return driver, task, RunContext(task, tmp_path, emit, CancelToken()), inbox


def turn(driver: HarnessDriver, task: Task, ctx: RunContext, result: ActionResult
         ) -> dict[str, Any]:
    decision = driver.decide(task, ctx)
    assert decision is not None and not decision.done and len(decision.actions) == 1
    action = decision.actions[0]
    driver.on_result(task, action, result)
    task.turn += 1
    return action.params


def ok(text: str, session: str = "s-1", cost: float = 0.1) -> ActionResult:
    return ActionResult(ResultStatus.SUCCESS, output=text, data={
        "session": session, "usage": {"cost_usd": cost, "input_tokens": 5}})


def finish(driver: HarnessDriver, task: Task, ctx: RunContext) -> Decision:
    decision = driver.decide(task, ctx)
    assert decision is not None and decision.done
    return decision


def test_one_turn_on_the_goal_then_done_with_its_last_line(tmp_path: Path) -> None:
    driver, task, ctx, _ = setup(tmp_path, llm={"model": "claude-sonnet-4-5"})
    params = turn(driver, task, ctx, ok("Looked.\nFixed add."))
    assert params["prompt"] == "fix add" and params["new_session"] and not params["session"]
    assert params["budget_usd"] == 1.0 and params["prices"]["output"] > 0
    assert task.usage.cost_usd == 0.1 and task.usage.input_tokens == 5
    ended = finish(driver, task, ctx)
    assert ended.status is TaskStatus.DONE and ended.summary == "Fixed add."


def test_a_line_typed_meanwhile_is_the_next_turn_in_the_same_session(tmp_path: Path) -> None:
    driver, task, ctx, inbox = setup(tmp_path)
    turn(driver, task, ctx, ok("Fixed."))
    inbox.put("also add a test")
    params = turn(driver, task, ctx, ok("Added."))
    assert params["prompt"] == "also add a test" and params["session"] == "s-1"
    assert params["budget_usd"] == 0.9  # what is left
    assert finish(driver, task, ctx).summary == "Added."


def test_an_interrupted_turn_is_continued_in_its_session(tmp_path: Path) -> None:
    driver, task, ctx, _ = setup(tmp_path)
    chosen = turn(driver, task, ctx, ActionResult(ResultStatus.INTERRUPTED,
                                                  data={"outcome": "unknown"}))["new_session"]
    restored = create_driver("claude", {}, DriverServices())
    restored.restore(driver.snapshot())  # a new process after the crash
    assert isinstance(restored, HarnessDriver)
    params = turn(restored, task, ctx, ok("Done now."))
    assert params["session"] == chosen and params["continue_last"]
    assert "interrupted before it finished" in params["prompt"] and "fix add" in params["prompt"]


def test_a_budget_stop_resumes_and_a_failed_turn_fails_the_task(tmp_path: Path) -> None:
    driver, task, ctx, _ = setup(tmp_path, "codex")
    stopped = ActionResult(ResultStatus.SUCCESS, data={"stopped": "budget", "session": "t-1"})
    turn(driver, task, ctx, stopped)
    params = turn(driver, task, ctx, ActionResult.failure("codex stopped mid-turn (exit 1)"))
    assert params["session"] == "t-1" and "interrupted" in params["prompt"]
    ended = finish(driver, task, ctx)
    assert ended.status is TaskStatus.FAILED and ended.summary == "codex stopped mid-turn (exit 1)"


def test_the_harness_model_server_comes_from_its_own_config_or_its_api(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    driver, *_ = setup(tmp_path, "codex", llm={"provider": "anthropic", "model": "claude-x",
                                               "base_url": "http://a.test"})
    assert driver.model is None and driver.base_url is None  # another API's
    driver, *_ = setup(tmp_path, "codex", llm={"provider": "openai", "model": "gpt-5",
                                               "base_url": "http://o.test/v1"})
    assert (driver.model, driver.base_url) == ("gpt-5", "http://o.test/v1")
    driver, *_ = setup(tmp_path, "claude", harness={"base_url": "http://h.test"})
    assert driver.base_url == "http://h.test"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1")
    driver, *_ = setup(tmp_path, "aider")
    assert driver.base_url == "http://env.test/v1"


def test_a_retryable_failure_is_tried_again_twice_in_its_session(tmp_path: Path) -> None:
    driver, task, ctx, _ = setup(tmp_path)
    overloaded = ActionResult(ResultStatus.ERROR, error="claude: API Error: 529 overloaded",
                              data={"retryable": True, "session": "s-1"})
    turn(driver, task, ctx, overloaded)
    again = turn(driver, task, ctx, overloaded)
    assert again["session"] == "s-1" and "interrupted" in again["prompt"]
    turn(driver, task, ctx, overloaded)
    ended = finish(driver, task, ctx)  # the third failure is the task's
    assert ended.status is TaskStatus.FAILED and "529" in ended.summary
