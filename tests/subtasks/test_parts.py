"""The parts of sub-tasks on their own: the verb's arguments, what stays private, the listing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from subtasks_support import workspace

from normalize.checkpoints import isolate
from normalize.checkpoints.shadow import ShadowRepo
from normalize.cli.listing import nested
from normalize.errors import ToolError
from normalize.intents import parse
from normalize.store.places import private_places
from normalize.subtasks.children import ChildSettings, SpawnRequest
from normalize.subtasks.spawner import child_id_for
from normalize.task import Task
from normalize.tools.spawn import parse_spawn


def spawn_action(text: str) -> object:
    decision = parse(text)
    assert [a.tool for a in decision.actions] == ["spawn"], decision
    action = decision.actions[0]
    action.key = "0.0"
    return parse_spawn(action)


def test_spawn_reads_its_flags_and_goal() -> None:
    request = spawn_action('spawn --isolated --model openai:gpt-x --budget $0.5 --max-turns 7 '
                           '--merge none --keep "fix the parser"')
    assert (request.goal, request.model, request.budget_usd, request.max_turns,
            request.isolated, request.merge, request.keep) == (
        "fix the parser", "openai:gpt-x", 0.5, 7, True, "none", True)
    assert spawn_action("spawn --isolated <<EOF\nwrite the docs\nEOF").goal == "write the docs"


@pytest.mark.parametrize(("text", "message"), [
    ("spawn --budget lots tidy", "--budget 'lots' is not a number"),
    ("spawn --max-turns 0 tidy", "--max-turns must be above 0"),
    ("spawn --merge squash tidy", "--merge 'squash': choose apply or none"),
    ("spawn --forever tidy", "unknown option --forever"),
    ("spawn --isolated", "spawn needs a goal"),
])
def test_spawn_names_a_bad_argument(text: str, message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("$", r"\$")):
        spawn_action(text)


def test_a_child_id_is_the_same_each_time_its_action_runs() -> None:
    asked = SpawnRequest(goal="tidy", key="3.1", isolated=True)
    assert child_id_for("abcd1234", asked) == child_id_for("abcd1234", replace(asked))
    assert child_id_for("abcd1234", asked) != child_id_for("abcd1234", replace(asked, key="3.2"))
    # a different spawn at the same place (a new decision after a rewind): a new child
    assert child_id_for("abcd1234", asked) != child_id_for("abcd1234", replace(asked, goal="x"))


def test_an_isolated_copy_keeps_the_rest_of_the_data_home_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in ("tasks", "shadow", "copies/c1/ws", "copies/c2/ws"):
        (home / name).mkdir(parents=True)
    harnesses = tmp_path.resolve() / "home-harness"  # every task's harness home
    assert private_places(home, tmp_path / "elsewhere") == (home.resolve(), harnesses)
    hidden = set(private_places(home, home / "copies" / "c1" / "ws"))
    real = home.resolve()
    assert {real / "tasks", real / "shadow", real / "copies" / "c2", harnesses} <= hidden
    assert not any(p in (real, real / "copies", real / "copies" / "c1") or
                   p == real / "copies" / "c1" / "ws" for p in hidden)


def test_a_copy_is_made_from_the_store_and_its_diff_applies_all_or_nothing(
        tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
    repo = ShadowRepo(ws, tmp_path / "home")
    base = isolate.current_tree(repo, "none-yet")
    copy = tmp_path / "home" / "copies" / "c" / "ws"
    assert isolate.make_copy(repo, base, copy) == [".venv"]
    assert (copy / ".venv").is_symlink() and not (copy / ".git").exists()
    (copy / "a.txt").write_text("1\ntwo\n3\n")
    (copy / "b.txt").write_text("B\n")
    changes = isolate.changes(repo, base, copy)
    assert "a.txt" in changes.stat and ".venv" not in changes.stat
    (ws / "a.txt").write_text("1\nzwei\n3\n")  # the parent changed the same line since
    assert isolate.apply(repo, changes.patch, copy.parent) == ["a.txt: hunk @@ -1,3 +1,3 @@"]
    assert (ws / "b.txt").read_text() == "b\n"  # nothing of it applied
    (ws / "a.txt").write_text("1\n2\n3\n")
    assert isolate.apply(repo, changes.patch, copy.parent) == []
    assert (ws / "a.txt").read_text() == "1\ntwo\n3\n" and (ws / "b.txt").read_text() == "B\n"
    assert isolate.apply(repo, changes.patch, copy.parent) == []  # applied before: no-op
    isolate.remove_copy(copy)
    assert not copy.parent.exists() and (ws / ".venv" / "bin" / "tool").exists()


def test_a_child_round_trips_with_its_parent_and_settings() -> None:
    task = Task.new("g", "/w", "llm", parent="p1", children=["c1", "c2"],
                    child=ChildSettings(key="2.0", depth=2, isolated=True, merge="none",
                                        base="abc", origin="/o"))
    again = Task.from_dict(task.to_dict())
    assert (again.parent, again.children, again.child) == ("p1", ["c1", "c2"], task.child)
    assert Task.from_dict({k: v for k, v in task.to_dict().items()
                           if k not in ("parent", "children", "child")}).children == []


def test_the_listing_puts_children_under_their_parent() -> None:
    def row(task_id: str, parent: str | None) -> list[object]:
        return [task_id, "done", "g", "llm", "/w", None, 1, 0.0, 0.0, parent, None]

    rows = [row("new", None), row("kid2", "par"), row("grand", "kid1"), row("kid1", "par"),
            row("par", None), row("orphan", "gone")]
    assert [(r[0], depth) for r, depth in nested(rows)] == [
        ("new", 0), ("par", 0), ("kid1", 1), ("grand", 2), ("kid2", 1), ("orphan", 0)]


@pytest.mark.parametrize(("depth", "children", "message"), [
    (2, [], "children may nest 2 deep and this task is at depth 2"),
    (0, [f"c{n}" for n in range(8)], "this task has started its 8 children already"),
])
def test_spawning_past_the_depth_or_count_is_refused_before_a_child_is_made(
        tmp_path: Path, depth: int, children: list[str], message: str) -> None:
    from normalize.cancel import CancelToken
    from normalize.execution.local import LocalExecutor
    from normalize.store import TaskStore
    from normalize.subtasks.spawner import Spawner

    store = TaskStore(tmp_path / "home", fsync=False)
    parent = Task.new("g", str(tmp_path), "llm", children=list(children),
                      child=ChildSettings(depth=depth) if depth else None)
    store.create(parent)
    spawner = Spawner(parent, store, LocalExecutor(1), cancel=CancelToken(),
                      set_model=lambda llm, model: None)
    recorded: list[object] = []
    with pytest.raises(ToolError, match=message):
        spawner.spawn(SpawnRequest(goal="more", key="0.0"), recorded.append)
    assert recorded == [] and parent.children == children
    assert [p.name for p in (tmp_path / "home" / "tasks").glob("*.json")] == [f"{parent.id}.json"]


def test_tasks_nests_children_and_flat_lists_them_in_their_own_place(
        tmp_path: Path, normalize_home: Path) -> None:
    from subtasks_support import cli

    from normalize.store import TaskStore

    store = TaskStore(normalize_home, fsync=False)
    at = {"created_at": 1.8e9, "updated_at": 1.8e9}  # a second apart: the listing's order
    parent = Task.new("the parent", str(tmp_path), "llm", children=["kid00001"], **at)
    store.create(parent)
    store.create(Task(id="kid00001", goal="the child", workspace=str(tmp_path), driver="llm",
                      parent=parent.id, child=ChildSettings(key="1.0"),
                      **{k: v + 1 for k, v in at.items()}))
    later = Task.new("a later task", str(tmp_path), "llm", **{k: v + 2 for k, v in at.items()})
    store.create(later)
    nested_view = cli("tasks", cwd=tmp_path, home=normalize_home).stdout.splitlines()[1:]
    flat_view = cli("tasks", "--flat", cwd=tmp_path, home=normalize_home).stdout.splitlines()[1:]
    assert [line.split()[0] for line in nested_view] == [later.id, parent.id, "kid00001"]
    assert "└ the child" in nested_view[2]
    assert [line.split()[0] for line in flat_view] == [later.id, "kid00001", parent.id]
    assert not any("└" in line for line in flat_view)  # the newest first, as before


def test_tasks_clean_removes_the_copies_no_task_needs_and_keeps_the_rest(
        tmp_path: Path, normalize_home: Path) -> None:
    from subtasks_support import cli

    from normalize.store import TaskStore
    from normalize.task import TaskStatus

    store = TaskStore(normalize_home, fsync=False)
    ended = Task(id="parent01", goal="p", workspace=str(tmp_path), driver="llm",
                 status=TaskStatus.DONE)
    stopped = Task(id="parent02", goal="p", workspace=str(tmp_path), driver="llm",
                   status=TaskStatus.INTERRUPTED)
    kids = {  # id: (parent, status, settings), and what the sweep does with its copy
        "collect1": ("parent01", TaskStatus.DONE, ChildSettings(isolated=True)),
        "waits001": ("parent02", TaskStatus.DONE, ChildSettings(isolated=True)),
        "keepme01": ("parent01", TaskStatus.DONE, ChildSettings(isolated=True, keep=True)),
        "forked01": ("parent01", TaskStatus.DONE, ChildSettings(key="fork", isolated=True)),
        "resumes1": ("parent01", TaskStatus.INTERRUPTED, ChildSettings(isolated=True)),
    }
    for task in (ended, stopped):
        store.create(task)
    for kid, (parent, status, settings) in kids.items():
        copy = normalize_home / "copies" / kid / "ws"
        copy.mkdir(parents=True)
        (copy / "work.txt").write_text(kid)
        store.create(Task(id=kid, goal="k", workspace=str(copy), driver="llm", parent=parent,
                          status=status, child=settings))
    (normalize_home / "copies" / "gone0001" / "ws").mkdir(parents=True)  # its task removed
    before = sorted(p.name for p in (normalize_home / "copies").iterdir())

    dry = cli("tasks", "clean", "--dry-run", cwd=tmp_path, home=normalize_home)
    assert dry.returncode == 0, dry.stderr
    assert sorted(p.name for p in (normalize_home / "copies").iterdir()) == before
    assert "2 copies to remove, 4 kept" in dry.stdout
    done = cli("tasks", "clean", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (normalize_home / "copies").iterdir()) == [
        "forked01", "keepme01", "resumes1", "waits001"]
    assert "removed copies/collect1: its task ended done and its parent done" in done.stdout
    assert "removed copies/gone0001: its task is gone" in done.stdout
    assert "kept copies/waits001: its parent parent02 is interrupted" in done.stdout
    assert store.load("collect1").status is TaskStatus.DONE  # the task itself stays


def test_a_python_flow_step_takes_isolation_and_merge(tmp_path: Path) -> None:
    from normalize.workflow.flow import Step, compile_flow

    spec = compile_flow(Step("write {f} <<EOF\nx\nEOF", name="each", for_each="files:*.txt",
                             as_="f", parallel=True, isolation="isolated", merge="none"),
                        base_dir=tmp_path)
    step = spec.steps[0]
    assert (step.isolation, step.merge, step.parallel) == ("isolated", "none", True)
