"""Steps you can name: `tasks show` and the report number them as `diff`/`undo` count them.

A snapshot of `tasks show` (task id, times and the workspace masked) for a task
with two edits, a look, a line typed while the model worked and a follow-up
instruction; then the numbers it prints are used with `diff` and `undo`.
"""

from __future__ import annotations

import re
from pathlib import Path

from checkpoint_helpers import cli, edit, run_scripted

from normalize.contract.driver import DriverServices
from normalize.drivers.llm import LineQueue
from normalize.events import BaseEvent, RunEnded
from normalize.providers.base import ModelRequest
from normalize.runner import RunOptions, follow_up, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.testing import ScriptedModel

SNAPSHOT = """\
steps:
  ▶ started  #0
  Editing calc.py.
  ✓ edit calc.py  (T)  #1
      --- a/calc.py
      +++ b/calc.py
      @@ -1,2 +1,2 @@
      -a = 1
      +a = 10
       b = 2
  ↳ sent to the model: keep the comments
  Looking.
  ✓ view calc.py  (T)
         1│ a = 10
         2│ b = 2
  ↻ resumed  #2
  ↳ follow-up: now rename b
  Editing calc.py.
  ✓ edit calc.py  (T)  #3
      --- a/calc.py
      +++ b/calc.py
      @@ -1,2 +1,2 @@
       a = 10
      -b = 2
      +bee = 2
  (#N is a step: `normalize diff ID N` shows it; `normalize undo ID --to N` goes back to it)
files changed:
  +2 -2  calc.py
"""


def masked(text: str, task_id: str, workspace: Path) -> str:
    text = text.replace(task_id, "ID").replace(str(workspace), "WS")
    text = re.sub(r"\(\d+\.\d+s\)", "(T)", text)
    return re.sub(r"elapsed: \d+\.\d+s", "elapsed: T", text)


def run_with_follow_up(ws: Path, home: Path) -> str:
    """A task that edits, is told a typed line, looks, ends, and edits again on a follow-up."""
    inbox = LineQueue()

    def typed(request: ModelRequest) -> str:
        inbox.put("keep the comments")  # typed while this request is in flight
        return edit("calc.py", "a = 1", "a = 10")

    model = ScriptedModel([typed, "Looking.\nview calc.py", "done changed a",
                           edit("calc.py", "b = 2", "bee = 2"), "done renamed b"], model="test")
    store = TaskStore(home, fsync=False)
    opts = RunOptions(workspace=ws, store=store, fsync=False, approve="yes",
                      services=DriverServices(model_factory=lambda spec, **_: model,
                                              inbox=inbox))
    spec = load_spec("dwim", ws)
    spec.llm = {**(spec.llm or {}), "fallback": []}
    task = start_task(spec, "tidy calc.py", opts)
    assert run_task(task, opts).status.value == "done"
    task = store.load(task.id)
    follow_up(task, "now rename b")
    assert run_task(task, opts, resumed=True).status.value == "done"
    assert model.remaining == 0
    return task.id


def test_tasks_show_numbers_the_steps_and_shows_what_the_person_said(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("a = 1\nb = 2\n")
    task_id = run_with_follow_up(ws, normalize_home)
    shown = cli("tasks", "show", task_id, cwd=ws, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    text = masked(shown.stdout, task_id, ws)
    assert text[text.index("steps:\n"):] == SNAPSHOT, text

    # the numbers are the ones `diff` and `undo` take
    second = cli("diff", task_id, "3", cwd=ws, home=normalize_home)
    assert "-b = 2" in second.stdout and "+bee = 2" in second.stdout
    assert "+a = 10" not in second.stdout
    first = cli("diff", task_id, "1", cwd=ws, home=normalize_home)
    assert "+a = 10" in first.stdout and "bee" not in first.stdout
    undone = cli("undo", task_id, "--to", "1", cwd=ws, home=normalize_home)
    assert undone.returncode == 0, undone.stderr
    assert (ws / "calc.py").read_text() == "a = 10\nb = 2\n"


def test_the_report_uses_the_same_step_numbers(tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("a = 1\nb = 2\n")
    task_id = run_with_follow_up(ws, normalize_home)
    report = cli("report", task_id, "-o", "-", cwd=ws, home=normalize_home)
    assert report.returncode == 0, report.stderr
    html = report.stdout
    marks = re.findall(r'<span class="meta">#(\d+)</span> <code>([^<]*)</code>', html)
    assert [m[0] for m in marks] == ["1", "3"], marks
    assert "step #1: 1 file, +1 -1" in html and "step #3: 1 file, +1 -1" in html
    assert "↳ follow-up instruction: now rename b" in html
    assert "↳ typed while the model worked: keep the comments" in html


def test_tasks_show_counts_files_changed_as_diff_stat_does(tmp_path: Path,
                                                           normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("a = 1\nb = 2\n")
    done = run_scripted(ws, normalize_home, edit("calc.py", "a = 1", "a = 10"),
                        edit("calc.py", "a = 10", "a = 100"), "done")
    shown = cli("tasks", "show", done.task_id, cwd=ws, home=normalize_home)
    stat = cli("diff", done.task_id, "--stat", cwd=ws, home=normalize_home)
    assert stat.stdout.splitlines() == [" calc.py  +1 -1", " 1 file changed, +1 -1"]
    assert shown.stdout.splitlines()[-2:] == ["files changed:", "  +1 -1  calc.py"]  # net


def test_a_failed_follow_up_does_not_repeat_the_earlier_summary(tmp_path: Path,
                                                                normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("a = 1\n")
    model = ScriptedModel(["done looked at calc.py"], model="test")
    ended: list[BaseEvent] = []
    store = TaskStore(normalize_home, fsync=False)
    opts = RunOptions(workspace=ws, store=store, fsync=False, approve="yes",
                      subscribers=[ended.append],
                      services=DriverServices(model_factory=lambda spec, **_: model))
    spec = load_spec("dwim", ws)
    spec.llm = {**(spec.llm or {}), "fallback": []}
    task = start_task(spec, "look at calc.py", opts)
    assert run_task(task, opts).status.value == "done"
    task = store.load(task.id)
    follow_up(task, "now rename a")  # the model has no reply left: this run fails
    outcome = run_task(task, opts, resumed=True)
    assert outcome.status.value == "failed"
    last = [e for e in ended if isinstance(e, RunEnded)][-1]
    assert "looked at calc.py" not in last.summary and outcome.task.summary != \
        "looked at calc.py"
