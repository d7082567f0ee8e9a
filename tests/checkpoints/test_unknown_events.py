"""A journal line of a type this version does not know (a newer normalize wrote it) is kept.

It is read back as an `UnknownEvent` holding its data: a resume goes on past it,
the journal keeps it byte for byte, and `tasks show` and the report name it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from checkpoint_helpers import cli

from normalize.contract.driver import DriverServices
from normalize.engine import Reply
from normalize.events import UnknownEvent, event_from_dict
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.tables import LLMTable
from normalize.testing import ScriptedModel

NEWER = {"type": "plan_revised", "v": 2, "steps": ["a", "b"], "reason": "found more"}


def options(ws: Path, home: Path, *replies: str) -> RunOptions:
    model = ScriptedModel(list(replies), model="test")
    return RunOptions(workspace=ws, store=TaskStore(home, fsync=False), fsync=False,
                      approve="yes", services=DriverServices(model_factory=lambda s, **_: model))


def test_an_unknown_event_is_kept_whole_when_read_back() -> None:
    line = {**NEWER, "task_id": "t1", "seq": 7, "ts": 1.5}
    event = event_from_dict(line)
    assert isinstance(event, UnknownEvent) and event.type == "plan_revised"
    assert event.data == {"steps": ["a", "b"], "reason": "found more"}
    assert event.to_dict() == line


def test_an_unknown_journal_line_survives_a_resume_and_shows_in_show_and_report(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    first = options(ws, normalize_home, "Asking first.\nask Which colour?")
    spec = load_spec("dwim", ws)
    spec.llm = replace(spec.llm or LLMTable(), fallback=())
    task = start_task(spec, "pick a colour", first)
    assert run_task(task, first).status.value == "waiting"
    store = TaskStore(normalize_home, fsync=False)
    journal = store.journal_path(task.id)
    seq = store.last_seq(store.load(task.id))
    written = json.dumps({**NEWER, "task_id": task.id, "seq": seq + 1, "ts": 2.0})
    with journal.open("a", encoding="utf-8") as fh:  # what a newer normalize appended
        fh.write(written + "\n")

    second = options(ws, normalize_home, "done picked blue")
    outcome = run_task(store.load(task.id), second, resumed=True, reply=Reply(answer="blue"))
    assert outcome.status.value == "done", outcome.error
    assert written in journal.read_text(encoding="utf-8").splitlines()

    shown = cli("tasks", "show", task.id, cwd=ws, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    assert "plan_revised: an event this version of normalize does not know" in shown.stdout
    as_json = cli("tasks", "show", task.id, "--json", cwd=ws, home=normalize_home)
    assert json.loads(written) in json.loads(as_json.stdout)["events"]
    out = tmp_path / "report.html"
    report = cli("report", task.id, "-o", str(out), cwd=ws, home=normalize_home)
    assert report.returncode == 0, report.stderr
    assert "plan_revised: an event this version of normalize does not know" in out.read_text()
