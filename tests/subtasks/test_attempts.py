"""Best-of-N: `agent --attempts N --pick COMMAND`, each attempt an isolated child process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from subtasks_support import cli, journal, needs_sandbox, script, task_state, tasks, workspace

from normalize.subtasks.children import Attempt, best_attempt

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXES = {1: "return a * b", 2: "return a + b", 3: "return b - a"}  # only the second passes


@needs_sandbox
def test_three_attempts_only_the_second_passes_its_pick_and_it_is_applied(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"calc.py": BUGGY, "test_calc.py": TEST})
    models = [script(tmp_path / f"try{n}.json", [
        f"write calc.py <<EOF\ndef add(a, b):\n    {fix}\nEOF", f"done tried {fix}"])
        for n, fix in FIXES.items()]
    ran = cli("agent", "--attempts", "3", "--pick", "python -m pytest -q -p no:cacheprovider",
              "--model", ",".join(models), "--approve", "yes", "-w", str(ws), "fix add",
              cwd=ws, home=normalize_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"  # the second's
    parent = next(t for t in tasks(normalize_home) if not t.get("parent"))
    kids = [task_state(normalize_home, k) for k in parent["children"]]
    assert [k["status"] for k in kids] == ["done"] * 3
    assert parent["summary"] == (f"attempt #2 of 3 picked: child {kids[1]['id']} done after "
                                 "2 turn(s), $0.0000: tried return a + b")
    assert [k["summary"] for k in kids] == [f"tried {fix}" for fix in FIXES.values()]
    collected = [e for e in journal(normalize_home, parent["id"])
                 if e["type"] == "child_collected"]
    assert [(e["attempt"], e["pick_exit"], e["picked"], e["applied"]) for e in collected] == [
        (1, 1, False, False), (2, 0, True, True), (3, 1, False, False)]
    for kid in kids:  # every copy kept for inspection, each with its own attempt in it
        copy = Path(kid["workspace"])
        assert copy.parent.parent == normalize_home / "copies"
        assert FIXES[kids.index(kid) + 1] in (copy / "calc.py").read_text()

    shown = cli("tasks", "show", parent["id"], cwd=ws, home=normalize_home).stdout
    rows = [line for line in shown.splitlines() if line.startswith(tuple(
        f"  {k['id']}  done " for k in kids))]
    assert [re.search(r"#(\d) pick: exit (\d)", r).groups() for r in rows] == [  # type: ignore[union-attr]
        ("1", "1"), ("2", "0"), ("3", "1")]
    assert "picked" in rows[1] and "picked" not in rows[0] + rows[2]
    assert all("1 file changed" in row for row in rows)

    written = cli("report", parent["id"], cwd=ws, home=normalize_home)
    assert written.returncode == 0, written.stderr
    parent_report = normalize_home / "reports" / f"report-{parent['id']}.html"
    assert written.stdout.splitlines() == [  # the sub-tasks' reports are said, not quiet
        f"wrote {parent_report}",
        "  and beside it, linked from it, the reports of 3 sub-tasks: " + ", ".join(
            f"report-{kid['id']}.html" for kid in kids)]
    html = (normalize_home / "reports" / f"report-{parent['id']}.html").read_text()
    assert "<h2>Sub-tasks</h2>" in html
    for number, kid in enumerate(kids, 1):
        assert f'<a href="report-{kid["id"]}.html"><code>{kid["id"]}</code></a></td>' \
               f"<td>#{number}</td><td>done</td><td>exit {0 if number == 2 else 1}</td>" in html
        assert (normalize_home / "reports" / f"report-{kid['id']}.html").is_file()
    assert html.count(">picked<") == 1 + 1  # the column's header, and the picked attempt
    assert "<th></th>" not in html
    undone = cli("undo", parent["id"], cwd=ws, home=normalize_home)
    assert undone.returncode == 0, undone.stderr
    assert (ws / "calc.py").read_text() == BUGGY
    cleaned = cli("tasks", "clean", cwd=ws, home=normalize_home)
    assert "3 copies removed, 0 kept" in cleaned.stdout, cleaned.stdout
    assert not any((normalize_home / "copies").iterdir())


def test_no_attempt_passing_applies_nothing_and_fails(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"calc.py": BUGGY})
    models = [script(tmp_path / f"try{n}.json", [
        f"write calc.py <<EOF\nattempt {n}\nEOF", "done"]) for n in (1, 2)]
    ran = cli("agent", "--attempts", "2", "--pick", "false", "--model", ",".join(models),
              "--approve", "yes", "-w", str(ws), "fix add", cwd=ws, home=normalize_home)
    assert ran.returncode != 0
    assert (ws / "calc.py").read_text() == BUGGY
    parent = next(t for t in tasks(normalize_home) if not t.get("parent"))
    assert parent["status"] == "failed"
    assert "no attempt passed" in ran.stdout + ran.stderr


def row(number: int, *, status: str = "done", pick: int | None = 0, lines: int = 1) -> Attempt:
    return Attempt(number, f"c{number}", status, diff_lines=lines, pick_exit=pick)


@pytest.mark.parametrize(("attempts", "picked"), [
    ([row(1, pick=1), row(2), row(3, pick=1)], 2),  # only the second passes
    ([row(1, lines=9), row(2, lines=3), row(3, lines=3)], 2),  # smallest diff, then the first
    ([row(1, status="failed", lines=1), row(2, lines=5)], 2),  # a failed attempt never wins
    ([row(1, pick=None, lines=4), row(2, pick=None, lines=2)], 2),  # no --pick: done is enough
    ([row(1, pick=1), row(2, pick=-1)], None),  # a killed pick (timeout) does not pass
])
def test_the_pick_rule(attempts: list[Attempt], picked: int | None) -> None:
    best = best_attempt(attempts)
    assert (best.number if best else None) == picked


@pytest.mark.parametrize(("args", "message"), [
    (["--attempts", "1"], "--attempts 1: choose 2 to 8"),
    (["--pick", "pytest"], "--pick goes with --attempts N"),
    (["--model", "scripted:a.json,scripted:b.json"], "several models go with --attempts N"),
])
def test_attempt_flags_are_checked_in_one_line(tmp_path: Path, normalize_home: Path,
                                               args: list[str], message: str) -> None:
    done = cli("agent", *args, "do it", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and tasks(normalize_home) == []


CHECK = "python -m pytest -q -p no:cacheprovider\n"


@needs_sandbox
def test_an_attempt_that_bends_its_pick_is_disqualified_and_the_honest_one_wins(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"calc.py": BUGGY, "test_calc.py": TEST, "check.sh": CHECK})
    bends = {  # each passes its own pick with a smaller diff than the honest fix
        1: "write check.sh <<EOF\nexit 0\nEOF",
        2: "write test_calc.py <<EOF\ndef test_add():\n    pass\nEOF",
        3: "write conftest.py <<EOF\nimport pytest\n"
           "def pytest_collection_modifyitems(items):\n    items.clear()\nEOF",
    }
    honest = ("write calc.py <<EOF\ndef add(a, b):\n    return a + b\n"
              "# the honest fix, a longer diff than any of the others\n#\n#\nEOF")
    models = [script(tmp_path / f"try{n}.json", [reply, "done passes"])
              for n, reply in [*bends.items(), (4, honest)]]
    ran = cli("agent", "--attempts", "4", "--pick", "sh check.sh", "--model", ",".join(models),
              "--approve", "yes", "-w", str(ws), "fix add", cwd=ws, home=normalize_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "return a + b" in (ws / "calc.py").read_text()
    assert (ws / "check.sh").read_text() == CHECK and (ws / "test_calc.py").read_text() == TEST
    assert not (ws / "conftest.py").exists()
    parent = next(t for t in tasks(normalize_home) if not t.get("parent"))
    collected = [e for e in journal(normalize_home, parent["id"])
                 if e["type"] == "child_collected"]
    assert [(e["attempt"], e["pick_exit"], e["picked"]) for e in collected] == [
        (1, None, False), (2, None, False), (3, None, False), (4, 0, True)]
    compared = "\n".join(str(e.get("preview", ""))
                         for e in journal(normalize_home, parent["id"])
                         if e["type"] == "action_finished")  # what the model reads
    for name in ("check.sh", "test_calc.py", "conftest.py"):
        assert f"disqualified (changed {name})" in compared
