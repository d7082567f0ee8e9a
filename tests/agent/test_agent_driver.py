"""The LLM driver with a scripted model: replies, notes, plans, loops, replay, state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import scripted

from normalize.cancel import CancelToken
from normalize.contract.driver import DriverServices
from normalize.drivers.llm import CORRECTIVE_NOTE, LLMDriver
from normalize.drivers.models import LLMSettings
from normalize.errors import ConfigError
from normalize.intents import system_prompt_section
from normalize.prompts import default_prompt
from normalize.providers.base import ModelRequest
from normalize.testing import ScriptedModel

BAD_EDIT = ("Trying an edit.\nedit calc.py <<EOF\n<<<<<<< SEARCH\nnot in the file\n=======\nx\n"
            ">>>>>>> REPLACE\nEOF\ndone fixed")


def last(model: ScriptedModel, index: int = -1) -> str:
    return str(model.requests[index].messages[-1]["content"])


def test_a_reply_without_a_command_gets_one_corrective_note(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("I think the bug is in mean.", "view calc.py", "done looked")
    run = run_agent(repo, factory=factory)

    assert run.outcome.status.value == "done"
    assert CORRECTIVE_NOTE in last(model, 1) and CORRECTIVE_NOTE not in last(model, 2)
    warnings = [e["message"] for e in run.of("notice") if e["level"] == "warning"]
    assert "the reply held no command; asking the model again" in warnings
    [first, *_] = run.of("decision_made")
    assert first["thinking"] == "I think the bug is in mean." and first["actions"] == []
    model.assert_done()


def test_repeated_malformed_replies_fail_the_task(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("Hmm.", "Still thinking about it.")
    run = run_agent(repo, factory=factory)

    assert run.outcome.status.value == "failed" and run.outcome.exit_status == 1
    assert "without a command or done" in run.outcome.summary
    model.assert_done()


def test_a_good_reply_resets_the_malformed_count(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("Hmm.", "view calc.py", "Let me think.", "done ok")
    assert run_agent(repo, factory=factory).outcome.status.value == "done"
    model.assert_done()


def test_loop_detection_warns_then_ends_the_task_stuck(repo: Path, run_agent: Any) -> None:
    model, factory = scripted(*["Looking again.\nview calc.py"] * 4)
    run = run_agent(repo, factory=factory)

    assert run.outcome.status.value == "stuck" and run.outcome.exit_status == 5
    assert "view calc.py` ran 4 times with the same result" in run.outcome.summary
    [loop] = run.of("loop_detected")
    assert loop["command"] == "view calc.py" and loop["repeats"] == 3
    assert "You ran `view calc.py` 3 times" in last(model, 3)
    assert "You ran" not in last(model, 2)
    model.assert_done()  # no model call after it was stuck


def test_a_warned_loop_that_changes_course_goes_on(repo: Path, run_agent: Any) -> None:
    _model, factory = scripted(*["view calc.py"] * 3, "grep add", "done fine")
    run = run_agent(repo, factory=factory)
    assert run.outcome.status.value == "done"
    assert len(run.of("loop_detected")) == 1


def test_done_after_a_failed_command_is_not_applied(repo: Path, run_agent: Any) -> None:
    model, factory = scripted(BAD_EDIT, "done gave up on the edit")
    run = run_agent(repo, factory=factory)

    assert run.outcome.summary == "gave up on the edit"
    assert "`done` was not applied: `edit calc.py <<EOF` did not succeed" in last(model)
    model.assert_done()


def test_done_after_successful_commands_ends_without_another_call(repo: Path,
                                                                  run_agent: Any) -> None:
    model, factory = scripted("view calc.py\ndone calc.py reads fine")
    run = run_agent(repo, factory=factory)
    assert run.outcome.status.value == "done" and run.outcome.summary == "calc.py reads fine"
    assert len(run.of("action_finished")) == 1
    model.assert_done()


def test_plans_close_subtasks_before_the_task(repo: Path, run_agent: Any) -> None:
    model, factory = scripted(
        "plan read calc.py; fix mean",
        "view calc.py",
        "done read it",
        "done nothing to fix",
        "done reviewed calc.py",
    )
    run = run_agent(repo, factory=factory)

    assert run.outcome.status.value == "done" and run.outcome.summary == "reviewed calc.py"
    assert "## Where you are\n  - read calc.py  ← current" in last(model, 1)
    assert "now on subtask: read calc.py" in last(model, 1)
    assert "closed subtask: read calc.py; now on: fix mean" in last(model, 3)
    assert "every subtask is done" in last(model, 4)
    notices = [e["message"] for e in run.of("notice")]
    assert "closed subtask: read calc.py; now on: fix mean" in notices
    model.assert_done()


def test_notes_reach_the_following_prompts(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("note --turns 1 mean() is the culprit", "view calc.py",
                              "done ok")
    run_agent(repo, factory=factory)
    assert "## Notes\n- mean() is the culprit" in last(model, 1)
    assert "mean() is the culprit\n" not in last(model, 2).split("## Earlier actions")[0]


def test_max_actions_drops_extra_commands_and_says_so(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("view calc.py\ngrep add\ngrep mean", "done ok")
    run = run_agent(repo, factory=factory, llm={"max_actions": 2})
    assert [e["command"] for e in run.of("action_finished")] == ["view calc.py", "grep add"]
    assert "1 action(s) beyond the limit of 2 dropped: grep" in last(model)


def test_system_prompt_is_stable_and_complete(repo: Path, run_agent: Any) -> None:
    model, factory = scripted("view calc.py", "write notes.txt <<EOF\nhi\nEOF", "done ok")
    run_agent(repo, factory=factory)
    systems = {r.system for r in model.requests}
    assert len(systems) == 1  # byte-identical on every turn, though a file was added
    [system] = systems
    assert system.startswith(default_prompt().strip())
    assert system_prompt_section(omit=["mcp", "skill", "remember"]).strip() in system
    assert "- mcp SERVER" not in system  # no server configured: the verb is not offered
    assert "skill NAME" not in system  # no skill installed: nor is this one
    assert "remember TEXT" not in system  # nor this: the run keeps no memory
    assert f"Workspace: {repo}" in system and "Top level: calc.py" in system
    assert "notes.txt" not in system


def test_system_prompt_overrides(repo: Path, tmp_path: Path, run_agent: Any) -> None:
    model, factory = scripted("done ok")
    run_agent(repo, factory=factory, llm={"system_prompt": "You are terse."})
    system = model.requests[0].system
    assert system.startswith("You are terse.") and "## How to reply" in system
    assert default_prompt().strip() not in system

    (repo / ".normalize" / "workflows").mkdir(parents=True)
    (repo / ".normalize" / "workflows" / "mine.md").write_text("Project prompt.\n")
    (repo / ".normalize" / "workflows" / "terse.toml").write_text(
        '[workflow.llm]\nsystem_prompt_file = "mine.md"\n')
    from normalize.runner import RunOptions, load_spec, make_driver, start_task

    spec = load_spec("terse", repo)
    model, factory = scripted("done ok")
    task = start_task(spec, "x", RunOptions(workspace=repo))
    driver = make_driver(task, RunOptions(services=DriverServices(model_factory=factory)))
    assert isinstance(driver, LLMDriver)
    assert driver.system_prompt(repo).startswith("Project prompt.")


def test_text_deltas_stream_to_watchers_but_not_to_the_journal(repo: Path,
                                                               run_agent: Any) -> None:
    _model, factory = scripted("Having a look at the file now.\nview calc.py", "done ok")
    run = run_agent(repo, factory=factory)
    streamed = "".join(e.to_dict()["text"] for e in run.events if e.type == "text_delta")
    assert streamed == "Having a look at the file now.\nview calc.pydone ok"
    assert run.of("text_delta") == []
    [requested, *_] = run.of("model_requested")
    assert requested["model"] == "test" and requested["input_chars"] > 1000


def test_usage_cost_and_budget_with_a_priced_model(repo: Path, run_agent: Any) -> None:
    model = ScriptedModel(["view calc.py", "grep add", "done ok"], model="house-1")
    model.name = "acme"  # a provider the price table does not know as free

    def factory(spec: str, **_: Any) -> ScriptedModel:
        return model

    prices = {"house-1": {"input": 1000.0, "output": 1000.0}}  # $1000/Mtok: $0.001/token
    run = run_agent(repo, factory=factory, llm={"prices": prices},
                    limits={"max_cost_usd": 0.05})
    task = run.outcome.task
    assert run.outcome.status.value == "limit_reached" and run.outcome.exit_status == 3
    assert task.turn == 1 and task.usage.requests == 1
    assert task.usage.cost_usd == pytest.approx(task.usage.input_tokens * 0.001 + (
        task.usage.output_tokens + task.usage.cache_write_tokens) * 0.001, rel=1e-12)
    [reply] = run.of("model_replied")
    assert reply["cost_usd"] == round(task.usage.cost_usd, 8)

    task.limits.max_cost_usd = 10.0
    run.store.save(task)
    again = run_agent(repo, task_id=task.id, resume=True, factory=factory)
    assert again.outcome.status.value == "done"
    model.assert_done()


def test_an_unpriced_model_is_reported_once(repo: Path, run_agent: Any) -> None:
    model = ScriptedModel(["view calc.py", "done ok"], model="house-2")
    model.name = "acme"
    run = run_agent(repo, factory=lambda spec, **_: model)
    warnings = [e["message"] for e in run.of("notice") if "no price known" in e["message"]]
    assert warnings == ["no price known for acme:house-2: its cost counts as $0 against the "
                        "budget (add it under [workflow.llm.prices])"]


def test_cancel_during_the_model_call_interrupts_resumably(repo: Path, run_agent: Any) -> None:
    cancel = CancelToken()

    def stop(request: ModelRequest) -> str:
        cancel.cancel("stopped by SIGINT")
        return "view calc.py"

    _model, factory = scripted(stop, "done resumed fine")
    run = run_agent(repo, factory=factory, cancel=cancel)
    assert run.outcome.status.value == "interrupted" and run.outcome.exit_status == 130
    assert run.of("action_started") == [] and run.of("model_replied") == []
    again = run_agent(repo, task_id=run.outcome.task.id, resume=True, factory=factory)
    assert again.outcome.summary == "resumed fine"


def test_replay_plays_a_recorded_task_again(repo: Path, tmp_path: Path, run_agent: Any) -> None:
    _model, factory = scripted("view calc.py", "grep add", "done recorded")
    first = run_agent(repo, factory=factory)
    recorded = [e["command"] for e in first.of("action_finished")]

    again = run_agent(repo, llm={"provider": "replay", "model": first.outcome.task.id})
    assert again.outcome.status.value == "done" and again.outcome.summary == "recorded"
    assert [e["command"] for e in again.of("action_finished")] == recorded
    assert [e["text"] for e in again.of("model_replied")] == \
        [e["text"] for e in first.of("model_replied")]


def test_conversation_compaction_is_recorded(repo: Path, run_agent: Any) -> None:
    for n in range(6):
        (repo / f"m{n}.py").write_text("".join(f"value_{i} = \"{i * 7919}\"  # a comment\n"
                                                   for i in range(80)))
    model, factory = scripted(*[f"view m{n}.py" for n in range(6)], "done ok")
    run = run_agent(repo, factory=factory,
                    context={"strategy": "conversation", "compact_after_chars": 3000})
    compacted = run.of("context_compacted")
    assert compacted and all(c["after_chars"] < c["before_chars"] for c in compacted)
    assert "… compacted (80 lines)" in "".join(m["content"] for m in model.requests[-1].messages)


def test_driver_state_stays_bounded(repo: Path, run_agent: Any) -> None:
    steps = [f"note --turns 2 step {n}\ngrep x{n}" for n in range(40)] + ["done ok"]
    for n in range(40):
        (repo / f"m{n}.py").write_text(f"x{n} = {n}\n")
    _model, factory = scripted(*steps)
    run = run_agent(repo, factory=factory, limits={"max_turns": 100})
    sizes = [e["bytes"] for e in run.of("checkpoint_saved")]
    assert run.outcome.status.value == "done"
    assert max(sizes[-10:]) <= 1.1 * max(sizes[20:30])  # 15 turns on, the file has not grown
    state = run.outcome.task.driver_state
    assert len(json.dumps(state)) < 20_000


def test_goal_template_and_config_errors() -> None:
    driver = LLMDriver.from_config(
        {"llm": {"provider": "scripted", "model": "x"}, "context": {"strategy": "flat"},
         "vars": {"area": "the parser"}, "goal": "Review {area}: {task}"},
        DriverServices())
    from normalize.task import Task

    task = Task.new("be thorough", "/tmp", "llm")
    assert driver.goal(task) == "Review the parser: be thorough"
    assert driver.context.name == "flat"
    for bad, message in (({"max_actions": 0}, "at least 1"),
                         ({"thinking": "yes"}, "workflow.llm.thinking must be a boolean"),
                         ({"modle": "x"}, "unknown key 'modle'")):
        try:
            LLMSettings.from_config(bad)
        except ConfigError as err:
            assert message in str(err)
        else:
            raise AssertionError(f"{bad} was accepted")
    assert LLMSettings.from_config({"model": "ollama:llama3.1"}).spec == "ollama:llama3.1"
    assert LLMSettings(fallback=("claude-haiku-4-5", "openai:gpt-4.1")).fallback_specs == \
        ["anthropic:claude-haiku-4-5", "openai:gpt-4.1"]


def test_the_first_request_goes_before_the_sdk_loads_and_later_ones_through_it() -> None:
    code = (
        "import sys, normalize.drivers.llm as llm\n"
        "heavy = [m for m in ('anthropic', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from normalize.contract.driver import DriverServices\n"
        "driver = llm.LLMDriver.from_config({'llm': {}}, DriverServices())\n"
        "assert driver._client is None and 'anthropic' not in sys.modules\n"
        "import normalize.providers.anthropic as sdk\n"
        "from normalize.providers import ModelRequest, complete, create_client\n"
        "from normalize.testing.servers import FakeModelServer\n"
        "request = ModelRequest(system='s', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "with FakeModelServer(['one', 'two']) as server:\n"
        "    client = create_client('anthropic:claude-sonnet-4-5', base_url=server.url,\n"
        "                           env={'ANTHROPIC_API_KEY': 'k'})\n"
        "    assert complete(client, request).text == 'one'\n"
        "    sdk._import_thread.join()  # started once the first reply began\n"
        "    assert complete(client, request).text == 'two'\n"
        "    first, second = server.requests\n"
        "    assert first.body == {**second.body}, (first.body, second.body)\n"
        "    assert 'x-stainless-lang' not in first.headers  # plain httpx\n"
        "    assert second.headers['x-stainless-lang'] == 'python'  # the official SDK\n"
        "    client.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
