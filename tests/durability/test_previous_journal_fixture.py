"""A journal and a task file written by the release before events became `msgspec` structs
read back typed, write the same JSON again, and resume to the end.

The fixture `tests/fixtures/tasks/v3-journal/` was written by that release's
code (the `main` branch before issue #43): `journal.toml` (beside it) run with
`--approve yes --sandbox off --json`, stopped at its question. `365987a1.jsonl`
is its journal, `365987a1.out.jsonl` what `--json` printed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from durability_support import cli, task_file

from normalize.events import (
    ActionFinished,
    ProcessStarted,
    RunEnded,
    UnknownEvent,
    WaitingForInput,
    decode_line,
    decode_lines,
)
from normalize.store.journal import read_events

OLD = Path(__file__).parents[1] / "fixtures" / "tasks" / "v3-journal"
OLD_ID = "365987a1"


def install(home: Path, workspace: Path) -> None:
    tasks = home / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    data = json.loads((OLD / f"{OLD_ID}.json").read_text())
    data["workspace"] = str(workspace)
    (tasks / f"{OLD_ID}.json").write_text(json.dumps(data))
    shutil.copy(OLD / f"{OLD_ID}.jsonl", tasks / f"{OLD_ID}.jsonl")
    shutil.copytree(OLD / OLD_ID, tasks / OLD_ID)
    workspace.mkdir(exist_ok=True)
    shutil.copy(OLD / "journal.toml", workspace / "journal.toml")


def _lines(name: str) -> list[bytes]:
    return [line for line in (OLD / name).read_bytes().splitlines() if line.strip()]


def test_the_old_journal_decodes_in_one_call_as_known_events() -> None:
    events = decode_lines((OLD / f"{OLD_ID}.jsonl").read_bytes())
    assert events is not None, "a line of the old journal is not one of today's events"
    assert len(events) == len(_lines(f"{OLD_ID}.jsonl"))
    assert not any(isinstance(e, UnknownEvent) for e in events)
    kinds = {type(e) for e in events}
    assert {ActionFinished, ProcessStarted, WaitingForInput, RunEnded} <= kinds
    finished = [e for e in events if isinstance(e, ActionFinished) and e.tool == "run"]
    assert finished and finished[0].command == "run printf 'héllo\\n'"


def test_every_old_line_is_written_again_as_it_was() -> None:
    """Same keys, in the same order, with the same values (a float may be spelt otherwise:
    `1.1e-05` and `0.000011` are one number)."""
    for name in (f"{OLD_ID}.jsonl", f"{OLD_ID}.out.jsonl"):
        for line in _lines(name):
            event = decode_line(line)
            assert event is not None and not isinstance(event, UnknownEvent), line
            old, new = json.loads(line), json.loads(event.to_bytes())
            assert list(new) == list(old) and new == old, f"{name}: {line!r}"


def test_the_old_task_resumes_to_its_end(tmp_path: Path, normalize_home: Path) -> None:
    workspace = tmp_path / "ws"
    install(normalize_home, workspace)
    journal = normalize_home / "tasks" / f"{OLD_ID}.jsonl"
    before = journal.read_bytes()
    done = cli("resume", OLD_ID, "--answer", "yes", "--sandbox", "off", cwd=workspace,
               home=normalize_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "result.txt").read_text() == "The user answered: yes\n"
    assert task_file(normalize_home, OLD_ID)["status"] == "done"
    after = journal.read_bytes()
    assert after.startswith(before), "the old lines were rewritten"
    warnings: list[str] = []
    events = read_events(journal, warn=warnings.append)
    assert not warnings and len(events) == len(after.splitlines())
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert [e.status for e in ended] == ["waiting", "done"]
    shown = cli("tasks", "show", OLD_ID, cwd=workspace, home=normalize_home)
    assert shown.returncode == 0 and "Write the result file?" in shown.stdout, shown.stderr
