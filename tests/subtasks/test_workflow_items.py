"""Workflow steps as sub-tasks: `isolation = "isolated"` on `for_each` (parallel or not) and on a
nested `workflow` step; `merge = "apply" | "none"`."""

from __future__ import annotations

from pathlib import Path

import pytest
from subtasks_support import cli, journal, task_state, tasks, tree_hash, workspace

FILES = {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
HEAD = '[workflow]\nname = "items"\n[workflow.permissions]\nmode = "yes"\n'


def run(tmp_path: Path, home: Path, ws: Path, text: str, name: str = "items.toml") -> str:
    wf = tmp_path / name
    wf.write_text(HEAD + text)
    done = cli("run", str(wf), "-w", str(ws), cwd=ws, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(t["id"] for t in tasks(home) if not t.get("parent"))


def collected(home: Path, parent: str) -> list[dict[str, object]]:
    return [e for e in journal(home, parent) if e["type"] == "child_collected"]


def test_each_item_of_a_parallel_for_each_is_an_isolated_sub_task_merged_back(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, FILES)
    git_before = tree_hash(ws / ".git")
    parent = run(tmp_path, normalize_home, ws, '''
[[workflow.steps]]
name = "rewrite"
for_each = "files:*.txt"
as = "file"
parallel = true
isolation = "isolated"
action = "write {file} <<EOF\\nrewritten {file}\\nEOF"
''')
    kids = [task_state(normalize_home, k) for k in task_state(normalize_home, parent)["children"]]
    assert sorted(k["goal"] for k in kids) == [f"rewrite: {n}" for n in sorted(FILES)]
    assert {(k["driver"], k["status"], k["parent"]) for k in kids} == {
        ("workflow", "done", parent)}
    assert all(Path(k["workspace"]).parent.parent == normalize_home / "copies" for k in kids)
    assert [e["applied"] for e in collected(normalize_home, parent)] == [True] * 3
    assert {n: (ws / n).read_text() for n in FILES} == {n: f"rewritten {n}\n" for n in FILES}
    assert tree_hash(ws / ".git") == git_before
    shown = cli("diff", parent, cwd=ws, home=normalize_home).stdout
    assert all(f"+rewritten {n}" in shown for n in FILES)
    undone = cli("undo", parent, cwd=ws, home=normalize_home)
    assert undone.returncode == 0, undone.stderr
    assert {n: (ws / n).read_text() for n in FILES} == FILES


def test_items_in_order_see_each_others_changes_and_merge_none_only_reports(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"log.txt": ""})
    parent = run(tmp_path, normalize_home, ws, '''
[workflow.vars]
words = ["one", "two"]
[[workflow.steps]]
name = "append"
for_each = "words"
as = "word"
isolation = "isolated"
  [[workflow.steps.steps]]
  name = "read"
  action = "view log.txt"
  capture = "seen"
  [[workflow.steps.steps]]
  name = "add"
  action = "write log.txt <<EOF\\n{seen}{word}\\nEOF"
[[workflow.steps]]
name = "look"
for_each = "words"
as = "word"
isolation = "isolated"
merge = "none"
action = "write {word}.txt <<EOF\\n{word}\\nEOF"
''')
    events = collected(normalize_home, parent)
    assert [e["applied"] for e in events] == [True, True, False, False]
    assert "two" in (ws / "log.txt").read_text() and "one" in (ws / "log.txt").read_text()
    assert not (ws / "one.txt").exists() and not (ws / "two.txt").exists()  # reported only
    finished = [e for e in journal(normalize_home, parent)
                if e["type"] == "action_finished" and e["tool"] == "spawn"]
    assert "one.txt | 1 +" in finished[2]["preview"]


def test_a_nested_workflow_step_runs_as_an_isolated_sub_task(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, FILES)
    (tmp_path / "sub.toml").write_text(
        '[workflow]\nname = "sub"\n[workflow.vars]\nwhat = "x"\n[[workflow.steps]]\nname = "make"\n'
        'action = "write made.txt <<EOF\\nmade {what}\\nEOF"\n')
    parent = run(tmp_path, normalize_home, ws, '''
[workflow.vars]
what = "by the parent"
[[workflow.steps]]
name = "nested"
workflow = "sub.toml"
isolation = "isolated"
''')
    kid = task_state(normalize_home, task_state(normalize_home, parent)["children"][0])
    assert (kid["driver"], kid["status"], kid["goal"]) == ("workflow", "done", "nested: sub")
    assert (ws / "made.txt").read_text() == "made by the parent\n"


@pytest.mark.parametrize(("step", "message"), [
    ('action = "view a.txt"\nisolation = "isolated"', "`isolation` makes each item"),
    ('for_each = "files:*.txt"\naction = "view {item}"\nmerge = "none"', "`merge` says what"),
    ('for_each = "files:*.txt"\naction = "view {item}"\nisolation = "apart"', "isolation"),
])
def test_isolation_keys_are_checked_when_the_workflow_loads(
        tmp_path: Path, normalize_home: Path, step: str, message: str) -> None:
    wf = tmp_path / "bad.toml"
    wf.write_text(HEAD + f'[[workflow.steps]]\nname = "s"\n{step}\n')
    done = cli("workflows", "validate", str(wf), cwd=tmp_path, home=normalize_home)
    assert done.returncode == 2 and message in done.stdout + done.stderr, done.stdout
    assert "Traceback" not in done.stderr
