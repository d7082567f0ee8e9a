"""A journal read as typed events in one call gives what reading it line by line gives.

`read_events` decodes the whole journal with the union's decoder; a line that is
damaged, of a type this version does not know, or holds a value of another shape
sends it line by line, where each line goes the way `event_from_dict` goes.
"""

from __future__ import annotations

import json
from pathlib import Path

from normalize.events import (
    ActionFinished,
    Notice,
    StepStarted,
    UnknownEvent,
    decode_events,
    decode_lines,
)
from normalize.store.journal import read_events, read_journal

GOOD = [StepStarted(task_id="t1", seq=1, ts=1.0, name="look", index=1, total=2),
        ActionFinished(task_id="t1", seq=2, ts=2.0, key="0.0", tool="view", status="success",
                       data={"lines": 3}),
        Notice(task_id="t1", seq=3, ts=3.0, level="warning", message="careful")]


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_a_clean_journal_is_one_call_and_round_trips(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.jsonl", [e.to_bytes() for e in GOOD])
    assert decode_lines(path.read_bytes()) == GOOD
    assert read_events(path) == GOOD == list(decode_events(read_journal(path)))


def test_odd_lines_are_read_as_the_line_by_line_reader_reads_them(tmp_path: Path) -> None:
    newer = json.dumps({"type": "plan_revised", "task_id": "t1", "seq": 4, "ts": 4.0,
                        "steps": ["a"], "v": 2}).encode()
    loose = json.dumps({"type": "action_finished", "task_id": "t1", "seq": 5, "turn": 3.0,
                        "status": "success"}).encode()  # an integral float where an int goes
    wrong = json.dumps({"type": "notice", "seq": 6, "level": "shouting"}).encode()
    lines = [GOOD[0].to_bytes(), b"{not json", newer, b"[1, 2]", loose, wrong,
             GOOD[2].to_bytes(), b'{"type": "notice", "mess']
    path = _write(tmp_path / "j.jsonl", lines)
    path.write_bytes(path.read_bytes()[:-1])  # the last line torn: no newline
    warned: list[str] = []
    events = read_events(path, warn=warned.append)
    assert events == list(decode_events(read_journal(path)))
    assert [type(e) for e in events] == [StepStarted, UnknownEvent, ActionFinished, Notice]
    unknown, finished = events[1], events[2]
    assert isinstance(unknown, UnknownEvent) and unknown.type == "plan_revised"
    assert json.loads(unknown.to_bytes()) == json.loads(newer)  # given back as it was
    assert isinstance(finished, ActionFinished) and finished.turn == 3
    assert warned == [f"{path}:2: skipped an unreadable journal line",
                      f"{path}:8: skipped an unreadable journal line (a torn last line)"]


def test_reading_from_an_offset_names_the_offset(tmp_path: Path) -> None:
    first = GOOD[0].to_bytes() + b"\n"
    path = _write(tmp_path / "j.jsonl", [GOOD[0].to_bytes(), b"{broken", GOOD[1].to_bytes()])
    warned: list[str] = []
    assert read_events(path, offset=len(first), warn=warned.append) == [GOOD[1]]
    assert warned == [f"{path}@{len(first)}: skipped an unreadable journal line"]
    assert read_events(tmp_path / "none.jsonl") == []
