"""Workflows written in Python run like the same workflow written in TOML."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from wf_support import Run, Runner

from normalize.errors import ConfigError
from normalize.retry import RetryPolicy
from normalize.runner import RunOptions, run_flow
from normalize.store import TaskStore
from normalize.task import ActionResult
from normalize.workflow.flow import (
    Branch,
    Loop,
    Scope,
    Sequence,
    Step,
    compile_flow,
    register_condition,
    to_toml,
)

TOML = '''
[workflow]
name = "tour"

[workflow.vars]
target = "notes.txt"
files = ["a.py", "b.py"]

[workflow.context]
strategy = "flat"

[workflow.retry]
strategy = "fixed"
max_attempts = 2
base_delay = 0.01
max_delay = 8.0

[[workflow.steps]]
name = "read"
action = "view {target}"
capture = "first"
transform = "regex:alpha (\\\\w+)"

[[workflow.steps]]
name = "branch"
condition = "contains:alpha"
  [[workflow.steps.steps]]
  action = "grep alpha {target}"
  [[workflow.steps.else]]
  action = "grep beta {target}"

[[workflow.steps]]
name = "loop"
until = "contains:def"
max_iterations = 3
  [[workflow.steps.steps]]
  action = "view a.py"

[[workflow.steps]]
name = "inner"
context = "task_list"
cache = "none"
  [[workflow.steps.steps]]
  for_each = "files"
  as = "file"
  parallel = true
  action = "skeleton {file}"
  capture = "outlines"

[[workflow.steps]]
name = "end"
action = "done first word: {first}"
'''

FLOW = Scope(
    Step("view {target}", name="read", capture="first", transform=r"regex:alpha (\w+)"),
    Branch("contains:alpha", then=Step("grep alpha {target}"),
           otherwise=Step("grep beta {target}"), name="branch"),
    Loop(Step("view a.py"), until="contains:def", max_iterations=3, name="loop"),
    Scope(Step("skeleton {file}", for_each="files", as_="file", parallel=True,
               capture="outlines"), name="inner", context="task_list", cache="none"),
    Step("done first word: {first}", name="end"),
    context="flat", retry=RetryPolicy("fixed", max_attempts=2, base_delay=0.01),
)
VARS = {"target": "notes.txt", "files": ["a.py", "b.py"]}


def _populate(root: Path) -> None:
    (root / "notes.txt").write_text("alpha one\nbeta two\n")
    (root / "a.py").write_text("def f() -> int:\n    return 1\n")
    (root / "b.py").write_text("class B:\n    pass\n")


def _shape(run: Run) -> tuple[list[str], list[tuple[str, str]], str]:
    return run.types, run.results, run.outcome.summary


def test_python_and_toml_give_the_same_events_and_results(run_spec: Runner,
                                                          workspace: Path) -> None:
    _populate(workspace)
    from_toml = run_spec(TOML)
    from_python = run_spec(compile_flow(FLOW, name="tour", vars=VARS))
    assert from_toml.outcome.status.value == "done", from_toml.outcome.error
    assert _shape(from_python) == _shape(from_toml)
    assert from_toml.outcome.summary == "first word: one"
    commands = [c for c, _ in from_toml.results]
    assert commands == ["view notes.txt", "grep alpha notes.txt", "view a.py",
                        "skeleton a.py", "skeleton b.py"]


def test_the_python_flow_compiles_to_the_spec_the_toml_gives(tmp_path: Path) -> None:
    from normalize.workflow.loader import load_workflow

    path = tmp_path / "tour.toml"
    path.write_text(TOML)
    from_toml = load_workflow(path).to_dict()
    from_python = compile_flow(FLOW, name="tour", vars=VARS).to_dict()
    for spec in (from_toml, from_python):
        spec.pop("path")
        _drop_lines(spec)
    assert from_python == from_toml


def _drop_lines(data: Any) -> None:
    if isinstance(data, dict):
        data.pop("line", None)
        for value in data.values():
            _drop_lines(value)
    elif isinstance(data, list):
        for value in data:
            _drop_lines(value)


def test_a_python_callable_condition_and_source(run_spec: Runner, workspace: Path) -> None:
    _populate(workspace)
    seen: list[Any] = []

    def has_beta(result: ActionResult | None, variables: Mapping[str, Any]) -> bool:
        seen.append(variables["target"])
        return result is not None and "beta" in result.output

    def python_files(variables: Mapping[str, Any]) -> list[str]:
        return sorted(p.name for p in workspace.glob("*.py"))

    flow = Sequence(
        Step("view {target}"),
        Branch(has_beta, then=Step("view {file}", for_each=python_files, as_="file")),
    )
    run = run_spec(compile_flow(flow, vars={"target": "notes.txt"}))
    assert run.outcome.status.value == "done", run.outcome.error
    assert [c for c, _ in run.results] == ["view notes.txt", "view a.py", "view b.py"]
    assert seen == ["notes.txt"]


def test_run_flow_uses_the_same_store(workspace: Path, normalize_home: Path) -> None:
    _populate(workspace)
    events: list[Any] = []
    store = TaskStore(normalize_home, fsync=False)
    outcome = run_flow([Step("view a.py"), Step("done ok")], name="tiny",
                       options=RunOptions(workspace=workspace, store=store,
                                          subscribers=[events.append]))
    assert outcome.status.value == "done"
    saved = store.load(outcome.task.id)
    assert saved.status.value == "done" and saved.driver == "workflow"
    journal = [e["type"] for e in store.events(outcome.task.id)]
    assert journal[0] == "run_started" and journal[-1] == "run_ended"


def test_to_toml_is_a_workflow_file() -> None:
    text = to_toml(Loop(Step("test"), until="success", max_iterations=2), name="again")
    assert 'until = "success"' in text and "[[workflow.steps.steps]]" in text


@pytest.mark.parametrize(("flow", "message"), [
    (Step("veiw x"), "<python:python>:5:1: unknown command or step kind 'veiw' in action "
                     "'veiw x'; did you mean 'view'?"),
    (Step("view {nope}"), "<python:python>:5:1: unknown variable {nope} (known: notes, task, "
                          "workspace)"),
    (Step("test", parallel=True), "Step 'test': parallel needs for_each"),
    (Sequence(), "the flow has no steps"),
    (Sequence(Loop(until="success", name="again")), "Loop again has no steps"),
    (object(), "not a workflow node"),
])
def test_python_flows_are_validated_like_files(flow: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compile_flow(flow)
    assert str(caught.value).startswith(message)


def test_registered_names_are_stable_per_callable() -> None:
    def check(result: ActionResult | None, variables: Mapping[str, Any]) -> bool:
        return True

    assert register_condition(check) == register_condition(check)

    def check2(result: ActionResult | None, variables: Mapping[str, Any]) -> bool:
        return False

    check2.__name__ = "check"
    assert register_condition(check2) != register_condition(check)


def test_a_python_condition_needs_its_process_to_resume(run_spec: Runner, workspace: Path,
                                                        normalize_home: Path) -> None:
    from helpers import cli

    def always(result: ActionResult | None, variables: Mapping[str, Any]) -> bool:
        return True

    flow = Sequence(Step("ask go on?"), Branch(always, then=Step("done went on")))
    first = run_spec(compile_flow(flow))
    assert first.outcome.status.value == "waiting"
    # another process (the CLI) has no such callable: one clear line, no traceback
    proc = cli("resume", first.outcome.task.id, "--answer", "yes", cwd=workspace,
               home=normalize_home)
    assert proc.returncode == 1
    assert "condition py:always: no Python condition of that name is registered in this " \
           "process" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
