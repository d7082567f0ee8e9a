"""Follow-ups: `resume ID "next"` on a done task, the prompt after a task ends, queued lines."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_helpers import KEYS, Run, cli, scripted
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from normalize.cli.console import Environment
from normalize.cli.follow import FOLLOW_UP_PROMPT, follow_ups
from normalize.cli.prompt import PromptReader
from normalize.contract.driver import DriverServices
from normalize.drivers.llm import LineQueue
from normalize.providers.base import ModelRequest
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.testing.servers import FakeModelServer

NOTE = "mean passes a str to add"


def test_resume_with_an_instruction_continues_a_done_task(
        repo: Path, normalize_home: Path, server: FakeModelServer) -> None:
    server.add("Looking.\nview calc.py", f"Worth keeping.\nnote {NOTE}", "done looked at it",
               "Fixing it now.\ndone fixed")
    env = {**KEYS, "ANTHROPIC_BASE_URL": server.url}
    first = cli("agent", "look at calc.py", "--json", cwd=repo, home=normalize_home, env=env)
    assert first.returncode == 0, first.stderr
    found = re.search(r"task ([0-9a-f]{8})", first.stderr)
    assert found is not None
    task_id = found.group(1)
    again = cli("resume", task_id, cwd=repo, home=normalize_home, env=env)
    assert again.returncode == 2 and f'normalize resume {task_id} "NEXT' in again.stderr
    done = cli("resume", task_id, "now fix the type error", "--json", cwd=repo,
               home=normalize_home, env=env)
    assert done.returncode == 0, done.stderr
    server.assert_done()
    prompt = server.requests[-1].last_message
    assert "- (now) now fix the type error" in prompt
    assert "New instruction from the user: now fix the type error" in prompt
    assert NOTE in prompt  # the earlier notes are kept
    assert "look at calc.py" in prompt and "view calc.py" in prompt  # goal and history too
    assert len(server.requests) == 4


def _options(repo: Path, home: Path, factory: Any, **services: Any) -> RunOptions:
    return RunOptions(workspace=repo, store=TaskStore(home, fsync=False), fsync=False,
                      services=DriverServices(model_factory=factory, **services))


def test_the_follow_up_prompt_at_a_terminal(repo: Path, normalize_home: Path) -> None:
    model, factory = scripted(f"Noting.\nnote {NOTE}", "done looked",
                              "done added the docstring", "done renamed")
    options = _options(repo, normalize_home, factory)
    spec = load_spec("dwim", repo)
    outcome = run_task(start_task(spec, "look at calc.py", options), options)
    assert outcome.status.value == "done"
    out = io.StringIO()
    env = Environment(stdin=io.StringIO(), stdout=out, stderr=io.StringIO(), env={})
    with create_pipe_input() as pipe:
        reader = PromptReader(repo, input=pipe, output=DummyOutput())
        pipe.send_text("add a docstring to mean\n")
        pipe.send_text("rename mean to average\n")
        pipe.send_text("\n")  # an empty line leaves
        code = follow_ups(env, outcome, options, reader)
    assert code == 0
    model.assert_done()
    second, third = (r.messages[-1]["content"] for r in model.requests[2:])
    assert "- (now) add a docstring to mean" in second and NOTE in second
    assert "- (done) add a docstring to mean" in third and "- (now) rename mean" in third
    task = TaskStore(normalize_home).load(outcome.task.id)
    assert task.status.value == "done" and list(task.config.follow_ups) == [
        "add a docstring to mean", "rename mean to average"]


def test_ctrl_d_at_the_follow_up_prompt_leaves(repo: Path, normalize_home: Path) -> None:
    model, factory = scripted("done looked")
    options = _options(repo, normalize_home, factory)
    outcome = run_task(start_task(load_spec("dwim", repo), "look", options), options)
    env = Environment(stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO(), env={})
    prompts: list[str] = []
    with create_pipe_input() as pipe:
        reader = PromptReader(repo, input=pipe, output=DummyOutput())

        def read(prompt: str) -> str | None:
            prompts.append(prompt)
            pipe.close()  # Ctrl-D: the end of input
            return reader(prompt)

        assert follow_ups(env, outcome, options, read) == 0
    assert prompts == [FOLLOW_UP_PROMPT]
    model.assert_done()


def test_a_line_typed_while_the_model_works_reaches_its_next_turn(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    inbox = LineQueue()

    def working(request: ModelRequest) -> str:
        inbox.put("also check the tests")  # typed while this request is in flight
        return "Looking.\nview calc.py"

    model, factory = scripted(working, "done ok")
    run = run_agent(repo, factory=factory, options={"inbox": inbox})
    assert run.outcome.status.value == "done"
    assert "also check the tests" not in model.requests[0].messages[-1]["content"]
    assert ("The user wrote while you worked: also check the tests"
            in model.requests[1].messages[-1]["content"])
    assert [(e["kind"], e["answer"]) for e in run.of("input_received")] == [
        ("typed", "also check the tests")]  # journaled, so `tasks show` and the report show it


def test_agent_without_task_off_a_terminal_is_a_usage_error(
        repo: Path, normalize_home: Path) -> None:
    done = cli("agent", cwd=repo, home=normalize_home, env=KEYS)
    assert done.returncode == 2
    assert "TASK is empty" in done.stderr and "Traceback" not in done.stderr
