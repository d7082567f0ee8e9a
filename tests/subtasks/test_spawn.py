"""Sub-tasks end to end: a scripted parent spawns real child processes (scripted children).

The parent runs in this process (so its model can read its requests); each
child runs as its own `normalize` process through the local executor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from subtasks_support import (
    PY,
    append_program,
    cli,
    env,
    flow,
    journal,
    needs_sandbox,
    script,
    task_state,
    tasks,
    tree_hash,
    wait_for,
    wait_program,
    workspace,
)

from normalize.contract.driver import DriverServices
from normalize.providers.base import ModelRequest
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.testing import ScriptedModel

FILES = {"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n"}


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A file children wait for; written at the end whatever happened, so none waits on.

    It lies in HOME, one of the few places outside its workspace a sandboxed program
    still sees (`/tmp`, where pytest's directories are, is empty in its view).
    """
    home = tmp_path / "person"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    path = home / "gate"
    yield path
    path.write_text("go")


def run_parent(ws: Path, home: Path, replies: list[Any]) -> tuple[Any, ScriptedModel]:
    """Run a scripted parent (approvals: yes) in this process to its end."""
    store = TaskStore(home, fsync=False)
    model = ScriptedModel(replies, model="parent")
    opts = RunOptions(workspace=ws, store=store, fsync=False, approve="yes",
                      services=DriverServices(model_factory=lambda spec, **_: model))
    spec = load_spec("dwim", ws)
    spec.llm = {**(spec.llm or {}), "fallback": []}
    outcome = run_task(start_task(spec, "split the work", opts), opts)
    return outcome, model


def spawn_line(model: str, goal: str, *flags: str) -> str:
    return " ".join(["spawn", *flags, "--model", model, f'"{goal}"'])


def children_of(home: Path, parent: str) -> list[dict[str, Any]]:
    return [t for t in tasks(home) if t.get("parent") == parent]


@needs_sandbox
def test_three_isolated_children_run_together_and_land_in_the_parent(
        tmp_path: Path, normalize_home: Path, gate: Path) -> None:
    ws = workspace(tmp_path, FILES)
    git_before = tree_hash(ws / ".git")
    lines = ["parallel"]
    for number, name in enumerate(FILES, 1):
        child = script(tmp_path / f"child{number}.json", [
            f"write {name} <<EOF\nchanged by child {number}\nEOF",
            wait_program(gate),  # each waits until all three are running at once
            f"done child {number} rewrote {name}"])
        lines.append(spawn_line(child, f"rewrite {name}", "--isolated"))
    seen: list[str] = []

    def second(request: ModelRequest) -> str:
        seen.append("\n".join(str(m) for m in request.messages))
        return "done all three landed"

    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(
        zip(("outcome", "model"), run_parent(ws, normalize_home, ["\n".join(lines), second]),
            strict=True)))
    runner.start()
    try:
        wait_for(lambda: len([t for t in tasks(normalize_home) if t.get("parent")
                              and t["status"] == "running"]) == 3, 90,
                 "three children running at once")
    finally:
        gate.write_text("go")
        runner.join(120)
    outcome = result["outcome"]
    assert outcome.status.value == "done", outcome.error
    parent = outcome.task.id
    kids = children_of(normalize_home, parent)
    assert len(kids) == 3 and {k["status"] for k in kids} == {"done"}
    assert sorted(outcome.task.children) == sorted(k["id"] for k in kids)
    # the children's own timelines overlap: each started before any ended
    spans = []
    for kid in kids:
        events = [e for e in journal(normalize_home, kid["id"]) if e["type"] in
                  ("run_started", "run_ended")]
        spans.append((events[0]["ts"], events[-1]["ts"]))
    assert max(s for s, _ in spans) < min(e for _, e in spans)
    # the results reach the parent's next request
    assert seen and all(f"child {n} rewrote" in seen[0] for n in (1, 2, 3))
    for number, name in enumerate(FILES, 1):
        assert (ws / name).read_text() == f"changed by child {number}\n"
    assert not list((normalize_home / "copies").iterdir())  # collected: copies removed
    assert tree_hash(ws / ".git") == git_before  # the person's .git untouched
    shown = cli("diff", parent, cwd=ws, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    assert all(f"+changed by child {n}" in shown.stdout for n in (1, 2, 3))
    listing = cli("tasks", cwd=ws, home=normalize_home).stdout.splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith(parent))
    assert all("└ rewrite" in line for line in listing[at + 1:at + 4])
    show = cli("tasks", "show", parent, cwd=ws, home=normalize_home).stdout
    assert all(f"  {k['id']}  done" in show for k in kids)
    undone = cli("undo", parent, cwd=ws, home=normalize_home)
    assert undone.returncode == 0, undone.stderr
    assert {name: (ws / name).read_text() for name in FILES} == FILES
    assert tree_hash(ws / ".git") == git_before


def test_children_editing_the_same_lines_conflict_and_nothing_is_half_applied(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, FILES)
    one = script(tmp_path / "one.json", [
        "write a.txt <<EOF\nfrom one\nEOF", "done one"])
    two = script(tmp_path / "two.json", [
        "write b.txt <<EOF\nb from two\nEOF", "write a.txt <<EOF\nfrom two\nEOF", "done two"])
    decision = "\n".join([spawn_line(one, "edit a", "--isolated"),
                          spawn_line(two, "edit a and b", "--isolated")])
    outcome, _ = run_parent(ws, normalize_home, [decision, "done merged what fits"])
    finished = [e for e in journal(normalize_home, outcome.task.id)
                if e["type"] == "action_finished" and e["tool"] == "spawn"]
    applied = [e for e in finished if e["data"].get("applied")]
    refused = [e for e in finished if e["data"].get("conflicts")]
    assert len(applied) == 1 and len(refused) == 1, [e["data"] for e in finished]
    conflicts = refused[0]["data"]["conflicts"]
    assert conflicts == ["a.txt: hunk @@ -1 +1 @@"]
    assert refused[0]["status"] == "error" and "a.txt: hunk @@ -1 +1 @@" in refused[0]["preview"]
    if "two" in applied[0]["command"]:
        assert (ws / "a.txt").read_text() == "from two\n"
        assert (ws / "b.txt").read_text() == "b from two\n"
    else:  # two's b.txt, which did not conflict, was not applied either
        assert (ws / "a.txt").read_text() == "from one\n"
        assert (ws / "b.txt").read_text() == "beta\n"


@needs_sandbox
def test_a_parent_killed_while_children_run_collects_each_once_on_resume(
        tmp_path: Path, normalize_home: Path, gate: Path) -> None:
    ws = workspace(tmp_path, FILES)
    quick = script(tmp_path / "quick.json", [append_program("log.txt", "a"), "done a"])
    slow = script(tmp_path / "slow.json", [wait_program(gate), append_program("log.txt", "b"),
                                           "done b"])
    parent_model = script(tmp_path / "parent.json", [
        "parallel\n" + "\n".join([spawn_line(quick, "append a"), spawn_line(slow, "append b")]),
        "done both collected"])
    wf = flow(tmp_path / "parent.toml", parent_model)
    first = subprocess.Popen([PY, "-m", "normalize.cli.app", "run", str(wf), "--goal", "two",
                              "-w", str(ws)], cwd=ws, env=env(normalize_home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def settled() -> bool:
            kids = [t for t in tasks(normalize_home) if t.get("parent")]
            return sorted(t["status"] for t in kids) == ["done", "running"]

        wait_for(settled, 90, "one child done, the other running")
    finally:
        first.kill()  # SIGKILL: the parent leaves no ending; its children run on
        first.wait()
    parent = next(t["id"] for t in tasks(normalize_home) if not t.get("parent"))
    assert task_state(normalize_home, parent)["status"] == "running"
    second = subprocess.Popen([PY, "-m", "normalize.cli.app", "resume", parent],
                              cwd=ws, env=env(normalize_home), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: sum(e["type"] == "run_started"
                             for e in journal(normalize_home, parent)) == 2, 60,
                 "the parent resumed")
        gate.write_text("go")
        out, err = second.communicate(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 0, (out, err)
    assert sorted((ws / "log.txt").read_text().splitlines()) == ["a", "b"]  # each once
    events = journal(normalize_home, parent)
    assert [e["type"] for e in events].count("child_created") == 2  # made once, before
    collected = [e for e in events if e["type"] == "child_collected"]
    assert sorted(e["status"] for e in collected) == ["done", "done"]
    for kid in (t for t in tasks(normalize_home) if t.get("parent") == parent):
        runs = [e for e in journal(normalize_home, kid["id"]) if e["type"] == "run_started"]
        assert len(runs) == 1  # the finished one collected, the running one re-attached
    assert task_state(normalize_home, parent)["status"] == "done"


def test_a_childs_budget_must_fit_in_what_the_parent_has_left(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, FILES)
    child = script(tmp_path / "child.json", ["done never runs"])
    parent_model = script(tmp_path / "parent.json", [
        f'spawn --budget 5 --model {child} "too dear"', "done refused"])
    wf = flow(tmp_path / "parent.toml", parent_model, budget=1.0)
    done = cli("run", str(wf), "--goal", "thrifty", "-w", str(ws), "--json", cwd=ws,
               home=normalize_home)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    finished = [e for e in events if e["type"] == "action_finished"]
    assert finished and finished[0]["status"] == "error"
    assert "--budget 5 is more than the task has left for children ($1.0000)" in \
        finished[0]["error"]
    assert [t for t in tasks(normalize_home) if t.get("parent")] == []  # no child made


@needs_sandbox
def test_stopping_the_parent_stops_its_children_and_resume_finishes_them(
        tmp_path: Path, normalize_home: Path, gate: Path) -> None:
    ws = workspace(tmp_path, FILES)
    slow = script(tmp_path / "slow.json", [wait_program(gate), "done waited"])
    parent_model = script(tmp_path / "parent.json", [
        spawn_line(slow, "wait for the gate"), "done stopped and resumed"])
    wf = flow(tmp_path / "parent.toml", parent_model)
    first = subprocess.Popen([PY, "-m", "normalize.cli.app", "run", str(wf), "--goal", "one",
                              "-w", str(ws)], cwd=ws, env=env(normalize_home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: [t["status"] for t in tasks(normalize_home) if t.get("parent")]
                 == ["running"], 90, "the child running")
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) != 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    kid = next(t for t in tasks(normalize_home) if t.get("parent"))
    assert kid["status"] == "interrupted"  # stopped with its parent, not left running
    owner = (normalize_home / "tasks" / f"{kid['id']}.owner").read_text()
    assert not _alive(json.loads(owner)["pid"])
    parent = kid["parent"]
    assert task_state(normalize_home, parent)["status"] == "interrupted"
    gate.write_text("go")
    done = cli("resume", parent, cwd=ws, home=normalize_home)
    assert done.returncode == 0, done.stdout + done.stderr
    kid = task_state(normalize_home, kid["id"])
    assert kid["status"] == "done"
    runs = [e for e in journal(normalize_home, kid["id"]) if e["type"] == "run_started"]
    assert len(runs) == 2  # resumed once by the resumed parent


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_childs_turn_limit_binds_and_its_outcome_says_so(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, FILES)
    child = script(tmp_path / "child.json", [
        "write a.txt <<EOF\nturn one\nEOF", "write a.txt <<EOF\nturn two\nEOF", "done"])
    outcome, _ = run_parent(ws, normalize_home, [
        spawn_line(child, "two turns of work", "--max-turns", "1"), "done saw the limit"])
    kid = task_state(normalize_home, outcome.task.children[0])
    assert (kid["status"], kid["turn"], kid["parent"]) == ("limit_reached", 1, outcome.task.id)
    assert (ws / "a.txt").read_text() == "turn one\n"  # a shared child: the parent's workspace
    finished = [e for e in journal(normalize_home, outcome.task.id)
                if e["type"] == "action_finished" and e["tool"] == "spawn"]
    assert finished[0]["status"] == "error"
    assert finished[0]["error"] == "the child ended limit_reached"
    assert "after 1 turn(s)" in finished[0]["preview"]
