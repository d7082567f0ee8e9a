"""Two tasks and a person in one workspace: `undo A` takes back only what A's actions did.

Each task runs in a process of its own (`run_task.py`, a scripted model). Task
A pauses between two of its actions (its model waits for a file the test
writes), or inside a program (which waits for one); meanwhile task B runs to
its end and a person edits files. Every step counts only what changed during
its own action, and of that only what its programs wrote (the write tracer),
so B's files and the person's are never A's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkpoint_helpers import cli, edit, program

HERE = Path(__file__).parent
DEADLINE = 60.0


def start(ws: Path, home: Path, replies: list[object], name: str) -> subprocess.Popen[str]:
    script = ws.parent / f"{name}.json"
    script.write_text(json.dumps(replies))
    paths = [str(HERE.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "NORMALIZE_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(paths)}  # tests/: its helpers import `support`
    return subprocess.Popen([sys.executable, str(HERE / "run_task.py"), str(ws), str(script)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    return out.strip().splitlines()[-1]


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + DEADLINE
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)


def stat_lines(task: str, ws: Path, home: Path) -> list[str]:
    proc = cli("diff", task, "--stat", cwd=ws, home=home)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("a.txt", "s.txt", "b.txt"):
        (root / name).write_text(name[0] + "\n")
    return root


def test_undo_of_one_task_leaves_the_other_task_and_the_person_alone(
        ws: Path, tmp_path: Path, normalize_home: Path) -> None:
    paused, go = tmp_path / "A.paused", tmp_path / "A.go"
    task_a = start(ws, normalize_home, [
        edit("a.txt", "a", "A"), edit("s.txt", "s", "A"),
        {"mark": str(paused), "wait": str(go),
         "reply": program("open('a2.txt', 'w').write('made by A\\n')")},
        "done"], "A")
    wait_for(paused, task_a)  # A is between its actions: B runs, a person edits
    b_id = finish(start(ws, normalize_home, [
        edit("b.txt", "b", "B"), program("open('b2.txt', 'w').write('made by B\\n')"),
        edit("s.txt", "A", "B"), "done"], "B"))
    (ws / "p.txt").write_text("the person's\n")
    (ws / "b.txt").write_text("B, then the person\n")
    go.write_text("")
    a_id = finish(task_a)

    assert sorted(stat_lines(a_id, ws, normalize_home)[:-1]) == [
        " a.txt  +1 -1", " a2.txt  +1 -0", " s.txt  +1 -1"]
    patch = cli("diff", a_id, cwd=ws, home=normalize_home).stdout
    assert "-s\n+A\n" in patch and "+B" not in patch  # A's own change to s.txt, not B's
    assert sorted(line.split()[0] for line in stat_lines(b_id, ws, normalize_home)[:-1]) == [
        "b.txt", "b2.txt", "s.txt"]
    proc = cli("undo", a_id, cwd=ws, home=normalize_home)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"normalize: refused s.txt: changed since task {a_id} last touched it "
        "(--force to restore it anyway)"]
    assert (ws / "a.txt").read_text() == "a\n" and not (ws / "a2.txt").exists()
    assert (ws / "s.txt").read_text() == "B\n"  # B's change to a file A also changed: kept
    assert (ws / "b.txt").read_text() == "B, then the person\n"
    assert (ws / "b2.txt").read_text() == "made by B\n"
    assert (ws / "p.txt").read_text() == "the person's\n"


def test_a_person_edit_between_a_tasks_actions_survives_its_undo(
        ws: Path, tmp_path: Path, normalize_home: Path) -> None:
    paused, go = tmp_path / "A.paused", tmp_path / "A.go"
    task_a = start(ws, normalize_home, [
        edit("a.txt", "a", "A"),
        {"mark": str(paused), "wait": str(go), "reply": edit("a.txt", "A", "AA")},
        "done"], "A")
    wait_for(paused, task_a)
    (ws / "b.txt").write_text("the person's b\n")
    (ws / "p.txt").write_text("the person's new file\n")
    go.write_text("")
    a_id = finish(task_a)
    assert stat_lines(a_id, ws, normalize_home) == [" a.txt  +1 -1",
                                                   " 1 file changed, +1 -1"]
    proc = cli("undo", a_id, cwd=ws, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "a.txt").read_text() == "a\n"
    assert (ws / "b.txt").read_text() == "the person's b\n"
    assert (ws / "p.txt").read_text() == "the person's new file\n"


def test_a_person_and_a_task_working_while_a_program_runs_survive_its_undo(
        ws: Path, tmp_path: Path, normalize_home: Path) -> None:
    go = ws / "program.go"  # in the workspace: a program sees none of /tmp outside it
    code = (f"import os, time; open('waiting', 'w').close(); "
            f"any(os.path.exists({str(go)!r}) or time.sleep(0.01) for _ in range(6000)); "
            "open('a.txt', 'w').write('A\\n')")
    task_a = start(ws, normalize_home, [program(code), "done"], "A")
    wait_for(ws / "waiting", task_a)  # the program runs: a person and task B work meanwhile
    (ws / "p.txt").write_text("the person's new file\n")
    (ws / "b.txt").write_text("the person's b\n")
    b_id = finish(start(ws, normalize_home, [
        edit("s.txt", "s", "B"), program("open('b2.txt', 'w').write('made by B\\n')"),
        "done"], "B"))
    go.write_text("")
    a_id = finish(task_a)
    assert sorted(stat_lines(a_id, ws, normalize_home)[:-1]) == [
        " a.txt  +1 -1", " waiting  added, empty"]
    assert sorted(stat_lines(b_id, ws, normalize_home)[:-1]) == [
        " b2.txt  +1 -0", " s.txt  +1 -1"]
    proc = cli("undo", a_id, cwd=ws, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "a.txt").read_text() == "a\n" and not (ws / "waiting").exists()
    assert (ws / "p.txt").read_text() == "the person's new file\n"
    assert (ws / "b.txt").read_text() == "the person's b\n"
    assert (ws / "s.txt").read_text() == "B\n" and (ws / "b2.txt").exists()
