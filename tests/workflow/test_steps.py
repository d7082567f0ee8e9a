"""Every key of WORKFLOWS.md's steps, end to end through the engine and the real tools."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from wf_support import Runner

from normalize.cancel import CancelToken
from normalize.contract.driver import DriverServices
from normalize.errors import ConfigError
from normalize.testing import ScriptedModel
from normalize.workflow.loader import load_workflow
from normalize.workflow.sources import SOURCES

PY = sys.executable


def test_vars_defaults_and_overrides(tmp_path: Path, run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    path = tmp_path / "vars.toml"
    path.write_text("""
[workflow]
name = "vars"
[workflow.vars]
target = "a.txt"
[[workflow.steps]]
action = "view {target}"
""")
    assert run_spec(load_workflow(path)).results == [("view a.txt", "success")]
    assert run_spec(load_workflow(path, overrides={"target": "b.txt"})).results == \
        [("view b.txt", "success")]
    with pytest.raises(ConfigError, match=r"--var tagret: the workflow .* has no variable "
                                          r"'tagret' \(it has: target\)"):
        load_workflow(path, overrides={"tagret": "b.txt"})


def test_for_each_sources(run_spec: Runner, workspace: Path) -> None:
    for name in ("a.py", "b.py", "notes.md"):
        (workspace / name).write_text("x = 1\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "c.py").write_text("y = 2\n")
    SOURCES.register("upper", lambda arg, ws, values: [arg.upper()])
    run = run_spec("""
[workflow]
name = "sources"
[workflow.vars]
listed = ["a.py", "notes.md"]
text = "b.py\\n\\nsub/c.py\\n"

[[workflow.steps]]
for_each = "listed"
action = "view {item}"

[[workflow.steps]]
for_each = "files:**/*.py"
as = "f"
action = "skeleton {f}"

[[workflow.steps]]
for_each = "lines:{text}"
action = "grep y {item}"
on_error = "continue"

[[workflow.steps]]
for_each = "code:sub"
action = "view {item}"

[[workflow.steps]]
for_each = "upper:notes.md"
action = "done {item}"
""")
    commands = [c for c, _ in run.results]
    assert commands == ["view a.py", "view notes.md",
                        "skeleton a.py", "skeleton b.py", "skeleton sub/c.py",
                        "grep y b.py", "grep y sub/c.py",
                        "view sub/c.py"]
    assert run.outcome.summary == "NOTES.MD"


def _clock_workflow(items: int, concurrency: int) -> str:
    # each item waits (up to 60 s) until its whole wave has arrived, so on a busy machine a
    # slow start cannot make concurrent items look sequential; run one at a time, they would
    # wait out the deadline and the spans would not overlap
    script = ("import os, time; os.makedirs(\\\"arrived\\\", exist_ok=True); "
              "open(os.path.join(\\\"arrived\\\", \\\"{item}\\\"), \\\"w\\\").close(); "
              f"need = min({items}, ({{item}} // {concurrency} + 1) * {concurrency}); "
              "deadline = time.time() + 60; "
              "next(1 for _ in iter(int, 1) if len(os.listdir(\\\"arrived\\\")) >= need "
              "or time.time() > deadline or time.sleep(0.01)); "
              "print(time.time()); time.sleep(2); print(time.time())")
    names = ", ".join(f'"{i}"' for i in range(items))
    return f"""
[workflow]
name = "clock"
[workflow.vars]
items = [{names}]
[[workflow.steps]]
for_each = "items"
parallel = true
max_concurrency = {concurrency}
action = "run {PY} -c '{script}'"
capture = "spans"
transform = "lines"
"""


def _spans(run: Any) -> list[tuple[float, float]]:
    spans = run.outcome.task.driver_state["vars"]["spans"]
    return [(float(start), float(end)) for start, end in spans]


def test_a_fan_out_really_overlaps(run_spec: Runner) -> None:
    run = run_spec(_clock_workflow(6, 6))
    assert run.outcome.status.value == "done", run.why
    spans = _spans(run)
    assert len(spans) == 6
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    fanned = [d for d in run.of("decision_made") if d.actions]
    assert len(fanned) == 1 and fanned[0].parallel and len(fanned[0].actions) == 6


def test_a_fan_out_respects_its_concurrency_limit(run_spec: Runner) -> None:
    run = run_spec(_clock_workflow(6, 2))
    spans = _spans(run)
    moments = sorted({t for span in spans for t in span})
    busiest = max(sum(1 for s, e in spans if s <= m < e) for m in moments)
    assert busiest == 2


def test_capture_and_transforms(run_spec: Runner, workspace: Path) -> None:
    (workspace / "data.json").write_text(json.dumps({"a": {"b": [10, 20]}}))
    (workspace / "version.txt").write_text("tool version 3.12.1 ok\n")
    (workspace / "padded.txt").write_text("   x   \n")
    (workspace / "rows.txt").write_text("a\n\nb\n")
    (workspace / "bare.txt").write_text("y")
    run = run_spec("""
[workflow]
name = "capture"
[[workflow.steps]]
action = "run cat data.json"
capture = "second"
transform = "json:a.b.1"
[[workflow.steps]]
action = "run cat version.txt"
capture = "version"
transform = 'regex:version (\\S+)'
[[workflow.steps]]
action = "run cat padded.txt"
capture = "stripped"
transform = "strip"
[[workflow.steps]]
action = "run cat rows.txt"
capture = "rows"
transform = "lines"
[[workflow.steps]]
action = "run cat bare.txt"
capture = "framed"
transform = "format:<{result}> after {version}"
[[workflow.steps]]
action = "done {second} {version} [{stripped}] {rows} {framed}"
""")
    assert run.outcome.status.value == "done", run.outcome.error
    variables = run.outcome.task.driver_state["vars"]
    assert variables["second"] == 20
    assert variables["rows"] == ["a", "b"]
    assert variables["framed"] == "<y> after 3.12.1"
    assert run.outcome.summary == "20 3.12.1 [x] a b <y> after 3.12.1"


ON_ERROR = """
[workflow]
name = "on-error"
[[workflow.steps]]
action = "run false"
capture = "out"
on_error = "{mode}"
[[workflow.steps]]
action = "done reached"
"""


@pytest.mark.parametrize(("mode", "status", "runs", "summary"), [
    ("fail", "failed", 1, None),
    ("skip", "done", 1, "reached"),
    ("continue", "done", 1, "reached"),
    ("retry", "failed", 3, None),
])
def test_on_error(run_spec: Runner, mode: str, status: str, runs: int,
                  summary: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from normalize.drivers import workflow

    monkeypatch.setattr(workflow, "DEFAULT_RETRY", {"strategy": "fixed", "max_attempts": 3,
                                                    "base_delay": 0.01})
    run = run_spec(ON_ERROR.format(mode=mode))
    assert run.outcome.status.value == status
    assert [c for c, _ in run.results] == ["run false"] * runs
    if summary is not None:
        assert run.outcome.summary == summary
    else:
        assert run.outcome.summary.startswith("step 'step 1' failed: ")
    if mode == "continue":
        assert "out" in run.outcome.task.driver_state["vars"]
    if mode == "skip":
        assert "out" not in run.outcome.task.driver_state["vars"]


def test_a_retry_delay_is_interrupted_by_cancel(run_spec: Runner) -> None:
    class StopDuringTheDelay(CancelToken):
        """Cancelled from another thread 0.2 s into the retry's wait (not at a fixed time:
        on a loaded machine `run false` itself can take longer than that)."""

        def wait(self, timeout: float | None = None) -> bool:
            threading.Timer(0.2, self.cancel, args=("stop",)).start()
            return super().wait(timeout)

    cancel = StopDuringTheDelay()
    started = time.monotonic()
    run = run_spec("""
[workflow]
name = "slow-retry"
[[workflow.steps]]
action = "run false"
retry = { strategy = "fixed", max_attempts = 2, base_delay = 30, max_delay = 60 }
""", cancel=cancel)
    assert time.monotonic() - started < 10
    assert run.outcome.status.value == "interrupted"
    assert run.outcome.task.driver_state["retry_delay"] == 30  # waited for again on resume
    assert run.outcome.task.driver_state["attempt"] == 2


def test_a_step_timeout_stops_the_command(run_spec: Runner) -> None:
    started = time.monotonic()
    run = run_spec("""
[workflow]
name = "timeout"
[[workflow.steps]]
action = "run sleep 20"
timeout = 0.5
""")
    assert time.monotonic() - started < 10
    assert run.outcome.status.value == "failed"
    finished = run.of("action_finished")[0]
    assert "timed out after 0.5 s" in (finished.error or "")
    assert run.of("decision_made")[0].actions[0]["params"]["timeout"] == 0.5


COUNTER = ("import pathlib, sys; p = pathlib.Path('n'); "
           "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); "
           "print(len(p.read_text())); sys.exit(0 if len(p.read_text()) >= {n} else 1)")


def test_until_loops_repeat_until_the_condition_holds(run_spec: Runner) -> None:
    run = run_spec(f"""
[workflow]
name = "until"
[[workflow.steps]]
name = "again"
until = "success"
max_iterations = 5
action = "run {PY} -c \\"{COUNTER.format(n=3)}\\""
[[workflow.steps]]
action = "done counted"
""")
    assert run.outcome.status.value == "done", run.outcome.error
    assert [s for _, s in run.results] == ["error", "error", "success"]


def test_an_until_loop_fails_when_its_bound_is_reached(run_spec: Runner) -> None:
    run = run_spec(f"""
[workflow]
name = "bounded"
[[workflow.steps]]
name = "again"
until = "success"
max_iterations = 2
  [[workflow.steps.steps]]
  action = "run {PY} -c \\"{COUNTER.format(n=9)}\\""
  [[workflow.steps.steps]]
  action = "view n"
""")
    assert run.outcome.status.value == "failed"
    assert run.outcome.summary == ("step 'again' failed: `until = 'success'` still false "
                                   "after 2 iterations")
    # a failing step ends its iteration: `view n` never ran
    assert [c.split()[0] for c, _ in run.results] == ["run", "run"]


def test_branch_else(run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("beta\n")
    run = run_spec("""
[workflow]
name = "else"
[[workflow.steps]]
action = "view a.txt"
[[workflow.steps]]
name = "which"
condition = "contains:alpha"
action = "done alpha"
  [[workflow.steps.else]]
  action = "done not alpha"
""")
    assert run.outcome.summary == "not alpha"
    assert [e.name for e in run.of("step_started")] == ["step 1", "which"]


def test_a_nested_workflow_file_runs_as_a_step(tmp_path: Path, run_spec: Runner,
                                               workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (tmp_path / "sub.toml").write_text("""
[workflow]
name = "sub"
[workflow.vars]
target = "unset"
[[workflow.steps]]
action = "view {target}"
[[workflow.steps]]
action = "done viewed {target}"
""")
    run = run_spec("""
[workflow]
name = "parent"
[workflow.vars]
target = "a.txt"
[[workflow.steps]]
name = "inner"
workflow = "sub.toml"
capture = "said"
[[workflow.steps]]
action = "done parent got: {said}"
""")
    assert run.outcome.status.value == "done", run.outcome.error
    assert run.outcome.summary == "parent got: viewed a.txt"
    assert [e.name for e in run.of("step_started")] == ["inner", "inner › step 1",
                                                        "inner › step 2", "step 2"]


def test_a_nested_workflow_resumes_mid_way(tmp_path: Path, run_spec: Runner,
                                           options_for: Any, workspace: Path) -> None:
    from normalize.engine import Reply
    from normalize.runner import open_task, run_task

    (tmp_path / "sub.toml").write_text("""
[workflow]
name = "sub"
[[workflow.steps]]
action = "ask which?"
capture = "answer"
[[workflow.steps]]
action = "done sub heard {answer}"
""")
    first = run_spec("""
[workflow]
name = "parent"
[[workflow.steps]]
workflow = "sub.toml"
capture = "said"
[[workflow.steps]]
action = "done {said}"
""")
    assert first.outcome.status.value == "waiting"
    assert first.outcome.task.driver_state["delegate"]["kind"] == "workflow"
    events: list[Any] = []
    options = options_for(workspace, events)
    task = open_task(first.outcome.task.id, options)
    outcome = run_task(task, options, resumed=True, reply=Reply(answer="blue"))
    assert outcome.status.value == "done", outcome.error
    assert outcome.summary == "sub heard The user answered: blue"


FIDDLE = "view a.txt"


def test_llm_decide_is_bounded_by_max_turns(run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    model = ScriptedModel([FIDDLE, "grep alpha a.txt"])
    run = run_spec("""
[workflow]
name = "bounded"
[[workflow.steps]]
name = "think"
action = "llm-decide poke at a.txt"
max_turns = 2
on_error = "continue"
capture = "why"
[[workflow.steps]]
action = "done after the model: {why}"
""", services=DriverServices(model_factory=lambda spec, **kw: model))
    model.assert_done()
    assert run.outcome.status.value == "done", run.outcome.error
    assert run.outcome.summary == "after the model: reached the step's max_turns (2)"
    assert [c for c, _ in run.results] == ["view a.txt", "grep alpha a.txt"]
    assert "poke at a.txt" in model.requests[0].messages[-1]["content"]


def test_llm_decide_ends_when_the_model_says_done(run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    model = ScriptedModel([FIDDLE, "done a.txt holds one line"])
    run = run_spec("""
[workflow]
name = "ends"
[[workflow.steps]]
action = "llm-decide"
prompt = "What is in a.txt?"
capture = "answer"
[[workflow.steps]]
action = "done the model said: {answer}"
""", services=DriverServices(model_factory=lambda spec, **kw: model))
    assert run.outcome.summary == "the model said: a.txt holds one line"
    assert run.types.count("model_requested") == 2


def test_llm_decide_resumes_mid_step(run_spec: Runner, options_for: Any,
                                     workspace: Path) -> None:
    from normalize.engine import Reply
    from normalize.runner import open_task, run_task

    (workspace / "a.txt").write_text("a\n")
    model = ScriptedModel(["ask which file?", "view a.txt", "done read a.txt"])
    services = DriverServices(model_factory=lambda spec, **kw: model)
    first = run_spec("""
[workflow]
name = "asks"
[[workflow.steps]]
action = "llm-decide read a file"
capture = "what"
[[workflow.steps]]
action = "done {what}"
""", services=services)
    assert first.outcome.status.value == "waiting"
    nested = first.outcome.task.driver_state["delegate"]
    assert nested["kind"] == "llm-decide" and nested["state"]["v"] == 1
    events: list[Any] = []
    options = options_for(workspace, events, services=services)
    task = open_task(first.outcome.task.id, options)
    outcome = run_task(task, options, resumed=True, reply=Reply(answer="a.txt"))
    model.assert_done()
    assert outcome.status.value == "done", outcome.error
    assert outcome.summary == "read a.txt"
    assert "The user answered: a.txt" in model.requests[1].messages[-1]["content"]


CHECKED = """
[workflow]
name = "checked"
[[workflow.steps]]
name = "read"
action = "run cat {file}"
capture = "data"
transform = "json"
schema = "count.schema.json"
[[workflow.steps]]
action = "done counted {data}"
"""
COUNT_SCHEMA = {"type": "object", "required": ["count"],
                "properties": {"count": {"type": "integer"}}}


@pytest.mark.parametrize(("text", "status"), [('{"count": 3}', "done"),
                                               ('{"count": "three"}', "failed")])
def test_a_captured_value_is_checked_against_its_schema(
        run_spec: Runner, workspace: Path, text: str, status: str) -> None:
    (workspace.parent / "count.schema.json").write_text(json.dumps(COUNT_SCHEMA))
    (workspace / "data.json").write_text(text)
    run = run_spec(CHECKED.replace("{file}", "data.json"))
    assert run.outcome.status.value == status, run.outcome.error
    variables = run.outcome.task.driver_state["vars"]
    if status == "done":
        assert variables["data"] == {"count": 3}
        assert run.outcome.summary.startswith("counted ")
    else:
        assert "data" not in variables
        assert run.outcome.summary == ("step 'read' failed: {data} does not match its schema: "
                                       "at count: 'three' is not of type 'integer'")


@pytest.mark.parametrize(("step", "message"), [
    ('action = "run true"\nschema = "count.schema.json"', "`schema` checks a captured value"),
    ('action = "run true"\ncapture = "x"\nschema = "missing.json"', "missing.json"),
    ('action = "run true"\ncapture = "x"\nschema = "bad.json"', "not a valid JSON Schema"),
])
def test_a_step_schema_is_checked_when_the_workflow_loads(
        tmp_path: Path, step: str, message: str) -> None:
    from normalize.errors import ConfigError
    from normalize.workflow.loader import load_workflow

    (tmp_path / "count.schema.json").write_text(json.dumps(COUNT_SCHEMA))
    (tmp_path / "bad.json").write_text('{"type": 12}')
    flow = tmp_path / "wf.toml"
    flow.write_text(f'[workflow]\nname = "w"\n[[workflow.steps]]\n{step}\n')
    with pytest.raises(ConfigError) as caught:
        load_workflow(flow)
    assert message in str(caught.value)
