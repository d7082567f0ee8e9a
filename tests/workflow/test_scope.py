"""Scopes: strategies inherited key by key, notes with lifetimes, history per scope."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wf_support import Runner

from normalize.contract.driver import DriverServices
from normalize.drivers.frames import Frame, Hop, steps_at
from normalize.drivers.workflow import WorkflowDriver
from normalize.execution.scope import Note, Resolved, Scope, ScopeSettings, resolve
from normalize.retry import RetryPolicy
from normalize.testing import ScriptedModel
from normalize.workflow.loader import load_workflow

# (outer, middle, inner) overrides → what the inner scope uses
INHERITANCE: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any],
                        tuple[str, str, str, int]]] = [
    ({}, {}, {}, ("task_tree", "persistent", "none", 1)),
    ({"context": "flat"}, {}, {}, ("flat", "persistent", "none", 1)),
    ({"context": "flat"}, {"context": "task_list"}, {}, ("task_list", "persistent", "none", 1)),
    ({"context": "flat"}, {}, {"context": "none"}, ("none", "persistent", "none", 1)),
    ({"cache": "memory"}, {}, {}, ("task_tree", "memory", "none", 1)),
    ({"cache": "memory"}, {"cache": "none"}, {}, ("task_tree", "none", "none", 1)),
    ({"cache": "memory"}, {"cache": "none"}, {"cache": "persistent"},
     ("task_tree", "persistent", "none", 1)),
    ({"retry": "fixed"}, {}, {}, ("task_tree", "persistent", "fixed", 3)),
    ({"retry": RetryPolicy("exponential", max_attempts=5)}, {}, {},
     ("task_tree", "persistent", "exponential", 5)),
    ({"retry": {"strategy": "fixed", "max_attempts": 4}}, {"retry": "none"}, {},
     ("task_tree", "persistent", "none", 1)),
    ({"retry": {"strategy": "fixed", "max_attempts": 4}}, {"context": "flat"},
     {"retry": {"strategy": "exponential", "max_attempts": 2}},
     ("flat", "persistent", "exponential", 2)),
    # each key on its own: overriding one leaves the other two inherited
    ({"context": "flat", "cache": "memory", "retry": "fixed"}, {"cache": "none"}, {},
     ("flat", "none", "fixed", 3)),
    ({"context": "flat", "cache": "memory", "retry": "fixed"}, {}, {"context": "conversation"},
     ("conversation", "memory", "fixed", 3)),
]


@pytest.mark.parametrize(("outer", "middle", "inner", "expected"), INHERITANCE)
def test_nested_scopes_inherit_each_key_unless_they_set_it(
        outer: dict[str, Any], middle: dict[str, Any], inner: dict[str, Any],
        expected: tuple[str, str, str, int]) -> None:
    root = Scope(**outer)
    scope = root.child(**middle).child(**inner)
    assert (scope.context, scope.cache["strategy"], scope.retry.strategy,
            scope.retry.attempts) == expected
    # the same rule through settings alone
    chain = [ScopeSettings.of(**s) for s in (outer, middle, inner)]
    resolved = resolve(chain)
    assert (resolved.context, resolved.cache["strategy"], resolved.retry["strategy"]) == \
        expected[:3]


def test_an_override_replaces_the_whole_table() -> None:
    root = Scope(cache={"strategy": "memory", "ttl_seconds": 5})
    assert root.child(cache="memory").cache == {"strategy": "memory"}
    assert root.child(context="flat").cache == {"strategy": "memory", "ttl_seconds": 5}


NESTED = """
[workflow]
name = "nested"
[workflow.context]
strategy = "flat"
[workflow.retry]
strategy = "fixed"
max_attempts = 4

[[workflow.steps]]
action = "test"

[[workflow.steps]]
name = "outer"
context = "task_list"
  [[workflow.steps.steps]]
  action = "test"
  [[workflow.steps.steps]]
  name = "inner"
  cache = "none"
  retry = "none"
    [[workflow.steps.steps.steps]]
    action = "test"
    [[workflow.steps.steps.steps]]
    action = "test"
    context = "conversation"
    retry = { strategy = "exponential", max_attempts = 2 }
"""

# frame path of the step's list, index of the step → (context, cache, retry, attempts)
TOML_CASES = [
    ([], 0, ("flat", "persistent", "fixed", 4)),
    ([1], 0, ("task_list", "persistent", "fixed", 4)),
    ([1, 1], 0, ("task_list", "none", "none", 1)),
    ([1, 1], 1, ("conversation", "none", "exponential", 2)),
]


@pytest.mark.parametrize(("path", "index", "expected"), TOML_CASES)
def test_nested_steps_in_toml_inherit_the_same_way(tmp_path: Path, path: list[int], index: int,
                                                   expected: tuple[str, str, str, int]) -> None:
    file = tmp_path / "nested.toml"
    file.write_text(NESTED)
    driver = WorkflowDriver(load_workflow(file))
    hops = tuple(Hop(i) for i in path)
    driver.frames = [Frame(hops[:n]) for n in range(len(hops) + 1)]
    step = steps_at(driver.spec.steps, hops)[index]
    resolved: Resolved = driver.resolved(step)
    policy = resolved.retry_policy
    assert (resolved.context, resolved.cache["strategy"], policy.strategy,
            policy.attempts) == expected


def test_inherited_retry_changes_how_often_a_step_runs(run_spec: Runner) -> None:
    run = run_spec("""
[workflow]
name = "retries"
[workflow.retry]
strategy = "fixed"
max_attempts = 3
base_delay = 0.01

[[workflow.steps]]
name = "inherits"
  [[workflow.steps.steps]]
  action = "run false"
  on_error = "continue"

[[workflow.steps]]
name = "overrides"
retry = "none"
  [[workflow.steps.steps]]
  action = "run false"
  on_error = "continue"
""")
    assert run.outcome.status.value == "done", run.outcome.error
    assert [s for _, s in run.results] == ["error"] * 4  # 3 attempts, then 1
    waits = [e.message for e in run.of("notice") if "retrying" in e.message]
    assert waits == ["retrying step 'step 1' (attempt 2 of 3) in 0.01 s",
                     "retrying step 'step 1' (attempt 3 of 3) in 0.01 s"]


def test_the_context_in_effect_reaches_an_llm_decide_step(run_spec: Runner) -> None:
    model = ScriptedModel(["ask which file?"])
    run = run_spec("""
[workflow]
name = "context"
[workflow.context]
strategy = "task_tree"

[[workflow.steps]]
name = "scope"
context = "flat"
  [[workflow.steps.steps]]
  action = "llm-decide look around"
  max_turns = 3
""", services=DriverServices(model_factory=lambda spec, **kw: model))
    assert run.outcome.status.value == "waiting"
    delegate = run.outcome.task.driver_state["delegate"]
    assert delegate["kind"] == "llm-decide"
    assert delegate["config"]["context"] == "flat"
    assert delegate["config"]["goal"] == "look around"
    assert delegate["turns"] == 1


# -- notes and history --------------------------------------------------------


def test_note_lifetimes() -> None:
    scope = Scope()
    scope.note("for two results", turns=2)
    scope.note("until a failure", until=r"FAILED")
    scope.note("for the scope")
    child = scope.child()
    child.note("the child's own")
    assert [n.text for n in child.notes] == ["for two results", "until a failure",
                                            "for the scope", "the child's own"]
    assert [n.text for n in scope.notes] == ["for two results", "until a failure",
                                             "for the scope"]
    child.record("test", "success", "1 passed")
    assert [n.turns for n in scope.notes if n.turns is not None] == [1]
    child.record("test", "error", "1 FAILED")
    assert [n.text for n in child.notes] == ["for the scope", "the child's own"]
    assert [n.text for n in child.close()] == ["the child's own"]
    assert [n.text for n in scope.notes] == ["for the scope"]
    assert [(h.command, h.status) for h in child.history] == [("test", "success"),
                                                              ("test", "error")]
    assert scope.history == []


def test_note_lifetimes_are_checked() -> None:
    with pytest.raises(Exception, match="at least 1"):
        Note("x", turns=0)
    with pytest.raises(Exception, match="invalid regex"):
        Note("x", until="(")
    assert Note("x", until="ok").lifetime == "until a result matches 'ok'"


def test_notes_from_note_steps_live_in_their_scope(run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    run = run_spec("""
[workflow]
name = "notes"

[[workflow.steps]]
action = "note --turns 2 short-lived"

[[workflow.steps]]
name = "group"
  [[workflow.steps.steps]]
  action = "note inner only"
  [[workflow.steps.steps]]
  action = "view a.txt"
  capture = "inside"
  transform = "format:{notes}"

[[workflow.steps]]
action = "view a.txt"
capture = "outside"
transform = "format:{notes}"

[[workflow.steps]]
action = "done"
""")
    assert run.outcome.status.value == "done", run.outcome.error
    variables = run.outcome.task.driver_state["vars"]
    # inside the group: the outer note (aged once) and the group's own
    assert variables["inside"] == "- short-lived\n- inner only"
    # after the group: its note ended with it; the outer one expired after two results
    assert variables["outside"] == ""


def test_each_scope_keeps_its_own_history(run_spec: Runner, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    run = run_spec("""
[workflow]
name = "history"

[[workflow.steps]]
action = "view a.txt"

[[workflow.steps]]
name = "group"
  [[workflow.steps.steps]]
  action = "grep a a.txt"
  [[workflow.steps.steps]]
  action = "ask go on?"
""")
    assert run.outcome.status.value == "waiting"  # no person at hand: the task waits
    frames = run.outcome.task.driver_state["frames"]
    root, group = (f["scope"] for f in frames)
    assert [(h["command"], h["status"]) for h in root["history"]] == [("view a.txt", "success")]
    assert group["name"] == "group"
    assert [h["command"] for h in group["history"]] == ["grep a a.txt"]
