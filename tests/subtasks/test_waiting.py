"""A child that waits for a person: its question surfaces through the parent, and either the
parent's answer or the child's own resume continues it."""

from __future__ import annotations

from pathlib import Path

from subtasks_support import cli, flow, journal, script, task_state, tasks, workspace


def spawn_asking(tmp_path: Path, name: str) -> str:
    child = script(tmp_path / f"{name}.json", [
        f"ask Which colour for {name}?", f"write {name}.txt <<EOF\npainted\nEOF",
        f"done painted {name}"])
    return f'spawn --isolated --model {child} "paint {name}"'


def test_a_waiting_childs_question_is_the_parents_and_an_answer_reaches_it(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "a\n"})
    parent_model = script(tmp_path / "parent.json", [
        spawn_asking(tmp_path, "one"), spawn_asking(tmp_path, "two"), "done both painted"])
    wf = flow(tmp_path / "parent.toml", parent_model)
    first = cli("run", str(wf), "--goal", "paint", "-w", str(ws), cwd=ws, home=normalize_home)
    assert first.returncode == 4, first.stdout + first.stderr  # waiting
    parent = next(t["id"] for t in tasks(normalize_home) if not t.get("parent"))
    one = task_state(normalize_home, parent)["children"][0]
    state = task_state(normalize_home, parent)
    assert state["status"] == "waiting"
    assert state["pending"]["question"] == f"sub-task {one} asks: Which colour for one?"
    assert task_state(normalize_home, one)["status"] == "waiting"
    assert Path(task_state(normalize_home, one)["workspace"]).is_dir()  # its copy stays
    listing = cli("tasks", cwd=ws, home=normalize_home).stdout
    assert f"? sub-task {one} asks: Which colour for one?" in listing
    assert f"normalize resume {parent} --answer TEXT" in first.stdout

    # the answer given to the parent reaches the child, which goes on with it
    second = cli("resume", parent, "--answer", "red", cwd=ws, home=normalize_home)
    assert second.returncode == 4, second.stdout + second.stderr  # now the second child asks
    kid = journal(normalize_home, one)
    assert [e["answer"] for e in kid if e["type"] == "input_received"] == ["red"]
    assert any("The user answered: red" in e.get("preview", "") for e in kid
               if e["type"] == "action_finished")
    assert (ws / "one.txt").read_text() == "painted\n"  # collected and applied
    two = task_state(normalize_home, parent)["children"][1]
    assert task_state(normalize_home, parent)["pending"]["question"] == \
        f"sub-task {two} asks: Which colour for two?"

    # answered on its own, the child finishes; the parent's resume then collects it
    direct = cli("resume", two, "--answer", "blue", cwd=ws, home=normalize_home)
    assert direct.returncode == 0, direct.stdout + direct.stderr
    assert not (ws / "two.txt").exists()  # in its copy only, until collected
    last = cli("resume", parent, cwd=ws, home=normalize_home)
    assert last.returncode == 0, last.stdout + last.stderr
    assert (ws / "two.txt").read_text() == "painted\n"
    events = journal(normalize_home, parent)
    collected = [e["child_id"] for e in events if e["type"] == "child_collected"]
    assert collected == [one, two]  # each once, after it ended
    assert [e["type"] for e in events].count("child_created") == 2
    assert task_state(normalize_home, parent)["status"] == "done"


def test_two_children_waiting_at_once_are_asked_one_after_the_other(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "a\n"})
    both = "parallel\n" + "\n".join(spawn_asking(tmp_path, n) for n in ("one", "two"))
    parent_model = script(tmp_path / "parent.json", [both, "done both painted"])
    wf = flow(tmp_path / "parent.toml", parent_model)
    first = cli("run", str(wf), "--goal", "paint", "-w", str(ws), cwd=ws, home=normalize_home)
    assert first.returncode == 4, first.stdout + first.stderr
    parent = next(t["id"] for t in tasks(normalize_home) if not t.get("parent"))
    kids = {task_state(normalize_home, k)["goal"]: k
            for k in task_state(normalize_home, parent)["children"]}
    one, two = kids["paint one"], kids["paint two"]  # (made side by side, in either order)
    assert {task_state(normalize_home, k)["status"] for k in (one, two)} == {"waiting"}
    asked = task_state(normalize_home, parent)["pending"]["question"]
    assert asked == f"sub-task {one} asks: Which colour for one?"

    second = cli("resume", parent, "--answer", "red", cwd=ws, home=normalize_home)
    assert second.returncode == 4, second.stdout + second.stderr  # the other one asks now
    assert task_state(normalize_home, parent)["pending"]["question"] == \
        f"sub-task {two} asks: Which colour for two?"
    assert (ws / "one.txt").exists() and not (ws / "two.txt").exists()
    last = cli("resume", parent, "--answer", "blue", cwd=ws, home=normalize_home)
    assert last.returncode == 0, last.stdout + last.stderr
    assert (ws / "two.txt").read_text() == "painted\n"
    answers = {k: [e["answer"] for e in journal(normalize_home, k)
                   if e["type"] == "input_received"] for k in (one, two)}
    assert answers == {one: ["red"], two: ["blue"]}  # each its own answer, once
    collected = [e["child_id"] for e in journal(normalize_home, parent)
                 if e["type"] == "child_collected"]
    assert collected == [one, two]  # in the order they were answered
