"""`resume ID --rewind N`: files and task state back to step N, then the task goes on."""

from __future__ import annotations

import json
from pathlib import Path

from checkpoint_helpers import cli, edit, program, run_scripted

from normalize.store import TaskStore


def test_rewind_restores_step_2_continues_and_keeps_the_rewound_steps(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("VALUE = 1\n")
    (ws / "notes.txt").write_text("notes\n")
    done = run_scripted(
        ws, normalize_home,
        edit("calc.py", "VALUE = 1", "VALUE = 2"),                       # step 1, turn 0
        "Writing b.\nwrite b.txt <<EOF\nbee\nEOF",                       # step 2, turn 1
        program("import os; open('calc.py', 'w').write('VALUE = 3\\n'); "
                "os.remove('notes.txt')"),                                # step 3, turn 2
        "done all three")
    assert done.outcome.status.value == "done"
    task_id = done.task_id
    assert (ws / "calc.py").read_text() == "VALUE = 3\n" and not (ws / "notes.txt").exists()
    script = tmp_path / "more.json"
    script.write_text(json.dumps(["write c.txt <<EOF\nsea\nEOF", "done went another way"]))

    proc = cli("resume", task_id, "--rewind", "2", "--model", f"scripted:{script}", "--quiet",
               cwd=ws, home=normalize_home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert proc.stdout.startswith(f"task {task_id}: rewound to step #2 (its files and its state "
                                  "as after that step); it goes on from there\n")

    assert (ws / "calc.py").read_text() == "VALUE = 2\n"  # as after step 2
    assert (ws / "notes.txt").read_text() == "notes\n"
    assert (ws / "b.txt").read_text() == "bee\n"
    assert (ws / "c.txt").read_text() == "sea\n"  # and it went on from there
    store = TaskStore(normalize_home)
    task = store.load(task_id)
    assert task.status.value == "done" and task.summary == "went another way"
    assert task.turn == 4  # turns 0-1 kept, turn 2 rewound, turns 2-3 again
    journal = list(store.events(task_id))
    rewound = [e for e in journal if e["type"] == "task_rewound"]
    assert len(rewound) == 1 and rewound[0]["step"] == 2
    assert sorted(rewound[0]["files"]) == ["calc.py", "notes.txt"]
    commands = [e["command"] for e in journal if e["type"] == "action_finished"]
    assert any("os.remove" in c for c in commands)  # the rewound step is still there
    kept = [e for e in journal if e["type"] == "action_finished"
            and rewound[0]["after_seq"] < e["seq"] < rewound[0]["seq"]]
    assert [("os.remove" in e["command"]) for e in kept] == [True]
    assert commands[-1].startswith("write c.txt")
    steps = [(e["step"], e["kind"]) for e in journal if e["type"] == "checkpoint_taken"]
    assert steps[:4] == [(0, "start"), (1, "action"), (2, "action"), (3, "action")]
    assert steps[4:] == [(4, "rewind"), (5, "resume"), (6, "action")]
    shown = cli("tasks", "show", task_id, cwd=ws, home=normalize_home).stdout
    assert "↺ rewound to step 2" in shown
    assert "  +1 -1  calc.py" in shown  # step 3's change to calc.py no longer counts
    page = cli("report", task_id, "-o", "-", cwd=ws, home=normalize_home).stdout
    assert page.count('class="turn rewound"') == 2  # turn 2 and the first run's last turn
    assert "rewound to step 2" in page and "<h3>rewind " in page
    assert "done: went another way" in page
    # the rewind is a step too: undoing it puts step 3's files back
    back = cli("undo", task_id, "--to", "3", cwd=ws, home=normalize_home)
    assert back.returncode == 0, back.stderr
    assert (ws / "calc.py").read_text() == "VALUE = 3\n" and not (ws / "notes.txt").exists()


def test_rewind_refuses_a_step_in_the_middle_of_a_turn_and_a_missing_step(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    done = run_scripted(ws, normalize_home,
                        "Two at once.\nwrite a.txt <<EOF\na\nEOF\nwrite b.txt <<EOF\nb\nEOF",
                        "done")
    middle = cli("resume", done.task_id, "--rewind", "1", cwd=ws, home=normalize_home)
    assert middle.returncode == 2
    assert "step 1 is in the middle of turn 0" in middle.stderr
    assert "Traceback" not in middle.stderr
    missing = cli("resume", done.task_id, "--rewind", "9", cwd=ws, home=normalize_home)
    assert missing.returncode == 2 and "step 9: task" in missing.stderr
    assert (ws / "a.txt").exists() and (ws / "b.txt").exists()
