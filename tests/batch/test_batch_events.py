"""`normalize batch --json` speaks the event union: every line decodes as any other event does,
stamped by the batch's one emitter (v, seq, ts) and redacted by it, as its journal is."""

from __future__ import annotations

import json
from pathlib import Path

from batch_support import cli, items_file, repos

from normalize.events import (
    EVENT_VERSION,
    BatchEnded,
    BatchResumed,
    BatchStarted,
    ItemUpdated,
    event_from_dict,
)

NOTES = """[workflow]
name = "notes"
workspace = "dir:{item.path}"
[[workflow.steps]]
name = "say"
action = "note {item.path}"
"""
SECRET = "sk-ant-api03-" + "Q" * 60  # an Anthropic key's shape: redacted wherever it is shown


def test_every_line_of_batch_json_is_an_event_and_a_secret_in_an_item_is_redacted(
        tmp_path: Path) -> None:
    (tmp_path / "wf.toml").write_text(NOTES)
    rows = [{"path": str(repo), "token": SECRET} for repo in repos(tmp_path, 2)]
    items = items_file(tmp_path / "items.jsonl", rows)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), "--json", cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    events = [event_from_dict(line) for line in lines]  # the function every reader uses
    assert all(line["v"] == EVENT_VERSION and line["ts"] > 0 for line in lines)
    started, *updates, ended = events
    assert isinstance(started, BatchStarted) and started.items == 2
    assert all(isinstance(e, ItemUpdated) for e in updates)
    assert isinstance(ended, BatchEnded) and ended.counts == {"done": 2}
    batch = started.batch
    assert {e.task_id for e in events} == {batch}  # the batch's emitter stamped them all
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for update in updates:
        assert isinstance(update, ItemUpdated)
        assert update.item["path"] == rows[update.position]["path"]
        assert update.item["token"] != SECRET and "REDACTED" in update.item["token"]
    assert sorted(e.status for e in updates if isinstance(e, ItemUpdated)) == \
        ["done", "done", "running", "running"]
    # the batch's journal holds the same events, between its run's start and end
    journal = [event_from_dict(json.loads(line)) for line in
               (home / "tasks" / f"{batch}.jsonl").read_text().splitlines()]
    assert [e for e in journal if e.type != "run_started" and e.type != "run_ended"] == events
    assert SECRET not in (home / "tasks" / f"{batch}.jsonl").read_text()

    resumed = cli("resume", batch, "--json", cwd=tmp_path, home=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = [event_from_dict(json.loads(line)) for line in resumed.stdout.splitlines()]
    assert isinstance(again[0], BatchResumed) and again[0].seq > ended.seq
    assert isinstance(again[-1], BatchEnded) and again[-1].counts == {"done": 2}
