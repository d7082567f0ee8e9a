"""What `resume --driver` and `resume --model` do, called from Python through the runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from normalize.contract.driver import DriverServices
from normalize.errors import UsageError
from normalize.runner import (
    RunOptions,
    hand_over,
    load_spec,
    run_task,
    start_task,
    switch_model,
)
from normalize.store import TaskStore
from normalize.task import Task


def script(path: Path, *replies: str) -> str:
    path.write_text(json.dumps(list(replies)))
    return str(path)


def model_workflow(workspace: Path, model: str, provider: str = "scripted") -> Path:
    flow = workspace / "agent.toml"
    flow.write_text(f'[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "{provider}"\n'
                    f'model = "{model}"\n[workflow.permissions]\nmode = "yes"\n')
    return flow


def first_turn(workspace: Path, options: RunOptions, model: str, **spec: str) -> Task:
    """A model task stopped by its turn limit after one reply."""
    (workspace / "a.txt").write_text("alpha\n")
    task = start_task(load_spec(str(model_workflow(workspace, model, **spec)), workspace),
                      "read a.txt", options)
    task.limits.max_turns = 1
    outcome = run_task(task, options)
    assert outcome.status.value == "limit_reached", outcome.error
    return outcome.task


@pytest.fixture
def options(tmp_path: Path, normalize_home: Path) -> RunOptions:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return RunOptions(workspace=workspace, store=TaskStore(normalize_home, fsync=False),
                      fsync=False)


def test_switch_model_makes_the_next_run_ask_the_new_model(options: RunOptions,
                                                          tmp_path: Path) -> None:
    first = script(tmp_path / "first.json", "view a.txt")  # one reply only: a second call fails
    task = first_turn(options.workspace, options, first)
    switch_model(task, f"scripted:{script(tmp_path / 'second.json', 'done switched')}")
    task.limits.max_turns = task.turn + 2
    outcome = run_task(task, options, resumed=True)
    assert outcome.status.value == "done", outcome.error
    assert outcome.summary == "switched"


def test_hand_over_gives_the_task_to_a_person(options: RunOptions, tmp_path: Path) -> None:
    task = first_turn(options.workspace, options, script(tmp_path / "s.json", "view a.txt"))
    typed = iter(["view a.txt", "done finished by hand"])
    options.services = DriverServices(read_line=lambda prompt: next(typed, None))
    assert hand_over(task, "user") == "llm"
    task.limits.max_turns = task.turn + 5
    outcome = run_task(task, options, resumed=True)
    assert outcome.status.value == "done" and outcome.summary == "finished by hand"
    saved = options.store.load(task.id) if options.store else None
    assert saved is not None and saved.driver == "user"
    assert set(saved.driver_states) == {"llm", "user"}


def test_hand_over_refuses_what_cannot_run_and_leaves_the_task_alone(
        options: RunOptions, tmp_path: Path) -> None:
    task = first_turn(options.workspace, options, script(tmp_path / "s.json", "view a.txt"))
    before = json.dumps(task.to_dict(), sort_keys=True)
    with pytest.raises(UsageError, match=r"^--driver robot: unknown driver \(known: .*user"):
        hand_over(task, "robot")
    with pytest.raises(UsageError, match=r"--model goes with --driver llm, claude, codex, "
                       r"aider \(a driver a model drives\), not --driver user"):
        hand_over(task, "user", model="scripted:other.json")
    assert json.dumps(task.to_dict(), sort_keys=True) == before


def test_replay_finds_the_recorded_task_in_the_store_the_caller_passed(
        tmp_path: Path, normalize_home: Path) -> None:
    """Not in the default store under NORMALIZE_HOME: the driver is lent the run's own."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = TaskStore(tmp_path / "elsewhere", fsync=False)
    options = RunOptions(workspace=workspace, store=elsewhere, fsync=False)
    recorded = first_turn(workspace, options, script(tmp_path / "s.json", "view a.txt"))
    assert not list((normalize_home / "tasks").glob("*.json"))  # nothing in the default store

    replayed = first_turn(workspace, options, recorded.id, provider="replay")
    replies = [e["text"] for e in elsewhere.events(replayed.id) if e["type"] == "model_replied"]
    assert replies == ["view a.txt"]


def test_the_scripted_provider_needs_no_test_package(tmp_path: Path) -> None:
    """`scripted:FILE` is a provider: resolving it never imports `normalize.testing`."""
    path = script(tmp_path / "s.json", "done")
    code = ("import sys\n"
            "from normalize.providers.registry import create_client\n"
            f"client = create_client('scripted:' + {path!r})\n"
            "print(type(client).__module__, 'normalize.testing' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stdout.split() == ["normalize.providers.scripted", "False"]
