"""`normalize batch` on this machine: items as sub-task processes, resumed after a crash.

Every test runs the real CLI; each item is a `normalize` process the local
executor starts, whose workflow leaves one line in its repository's
`effects.log` per run of its side effect.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    WORKFLOW,
    batch_id,
    cli,
    edit_items,
    effects,
    in_step,
    needs_sandbox,
    progress,
    runs_of,
    start,
    state,
    wait_for,
)

pytestmark = needs_sandbox


def test_forty_items_over_forty_repositories_each_done_once(tmp_path: Path) -> None:
    items = edit_items(tmp_path, 40)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), "--concurrency", "4",
               cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    assert effects(tmp_path) == {f"r{n:02d}": 1 for n in range(40)}
    for number in range(40):
        assert (tmp_path / "repos" / f"r{number:02d}" / "f.txt").read_text() == \
            f"repo {number}\nword{number}\n"
    parent = state(home, batch)
    assert parent["driver"] == "batch" and parent["status"] == "done"
    rows = progress(home, batch)
    assert [r["stage"] for r in rows] == ["collected"] * 40
    assert {r["attempts"] for r in rows} == {1}
    for row in rows:  # each item a sub-task of the batch, its id from the batch and position
        item = state(home, row["task_id"])
        assert item["parent"] == batch and item["status"] == "done"
    assert sorted(parent["children"]) == sorted(r["task_id"] for r in rows)
    assert done.stdout.splitlines()[-1].startswith(f"batch {batch} done: 40 done")


def test_the_parent_killed_then_resumed_collects_reattaches_and_submits_only_the_rest(
        tmp_path: Path) -> None:
    home_dir = tmp_path / "person"
    home_dir.mkdir()
    gate = home_dir / "gate"
    items = edit_items(tmp_path, 5, gates={1: gate})
    home = tmp_path / "home"
    # the parent dies (SIGKILL) right after it has collected its first item; item 1 then
    # still runs, waiting for its gate, in its own session
    first = cli("batch", "wf.toml", "--items", str(items), "--concurrency", "2",
                cwd=tmp_path, home=home, HOME=str(home_dir),
                NORMALIZE_CRASH_AT="batch_collected")
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    batch = batch_id(first.stdout)
    rows = progress(home, batch)
    assert rows[0]["stage"] == "collected" and rows[1]["stage"] == "submitted"
    running = rows[1]["task_id"]
    assert state(home, running)["status"] == "running"
    untouched = [r for r in rows if r["stage"] == "untouched"]
    assert len(untouched) >= 2
    resumed = start("resume", batch, cwd=tmp_path, home=home, HOME=str(home_dir))
    try:
        wait_for(lambda: all(r["stage"] != "untouched" for r in progress(home, batch)), 120,
                 "the rest submitted by the resumed parent")
        assert state(home, running)["status"] == "running"  # waited for, not run again
    finally:
        gate.write_text("go")
        out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert effects(tmp_path) == {f"r{n:02d}": 1 for n in range(5)}
    after = progress(home, batch)
    assert [r["stage"] for r in after] == ["collected"] * 5
    assert after[1]["attempts"] == 1 and runs_of(home, running) == 1  # re-attached
    assert state(home, batch)["status"] == "done"
    # the parent lists its children at most every few seconds: what the killed one made but
    # had not listed yet is listed by the resumed one, once, in order
    assert state(home, batch)["children"] == [r["task_id"] for r in after]
    assert out.splitlines()[0] == f"batch {batch}: resumed (5 items)"


KEYED = WORKFLOW.replace("action = \"run sh -c '", "action = \"run sh -c 'echo "
                         "$NORMALIZE_IDEMPOTENCY_KEY >> keys.log; ")


def test_a_killed_item_process_is_retried_and_its_effect_happens_once(tmp_path: Path) -> None:
    home_dir = tmp_path / "person"
    home_dir.mkdir()
    gate = home_dir / "gate"
    items = edit_items(tmp_path, 2, gates={0: gate})
    (tmp_path / "wf.toml").write_text(KEYED)  # each step also logs its idempotency key
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--json", cwd=tmp_path,
                   home=home, HOME=str(home_dir))
    try:
        assert parent.stdout is not None
        batch = json.loads(parent.stdout.readline())["batch"]
        wait_for(lambda: progress(home, batch)[0]["stage"] == "submitted", 60, "item 0")
        item = progress(home, batch)[0]["task_id"]
        wait_for(lambda: in_step(home, item, "1.0"), 120,
                 "item 0's effect done, its process waiting for its gate")
        # the wait step's first run has logged its key (the kill comes after, always)
        wait_for(lambda: len(_keys(tmp_path / "repos" / "r00")) == 2, 60, "the wait step's key")
        pid = json.loads((home / "tasks" / f"{item}.owner").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: progress(home, batch)[0]["attempts"] == 2, 120, "a second attempt")
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    assert effects(tmp_path) == {"r00": 1, "r01": 1}
    assert state(home, item)["status"] == "done"
    ended = json.loads(out.splitlines()[-1])
    assert ended["type"] == "batch_ended" and ended["counts"] == {"done": 2}
    # the wait step, cut short by the kill, ran again as another action and got the same
    # idempotency key as its first run (both logged it: a rerun repeats what the program
    # does, the key lets a service tell); another step or another item gets another key
    again = [e for e in _journal(home, item) if e.get("type") == "action_started"
             and "while" in e["command"]]
    assert len(again) == 2 and again[1]["key"] != again[0]["key"]
    keys = _keys(tmp_path / "repos" / "r00")
    assert keys == [f"{item}:0.0", *[f"{item}:{again[0]['key']}"] * 2]
    other = _keys(tmp_path / "repos" / "r01")
    assert len(other) == 2 and not set(keys) & set(other)


def _journal(home: Path, task_id: str) -> list[dict[str, Any]]:
    path = home / "tasks" / f"{task_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _keys(repo: Path) -> list[str]:
    return (repo / "keys.log").read_text().split()


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["plain", "json"])
def test_a_reader_that_leaves_after_the_id_stops_the_output_not_the_batch(
        tmp_path: Path, flags: list[str]) -> None:
    home_dir = tmp_path / "person"
    home_dir.mkdir()
    gate = home_dir / "gate"
    items = edit_items(tmp_path, 3, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--concurrency", "2", *flags,
                   cwd=tmp_path, home=home, HOME=str(home_dir))
    assert parent.stdout is not None
    # `BATCH=$(normalize batch … | head -1)`: a real pipe that head alone reads, and leaves
    head = subprocess.Popen(["head", "-1"], stdin=parent.stdout, stdout=subprocess.PIPE,
                            text=True)
    parent.stdout.close()
    try:
        shown, _ = head.communicate(timeout=120)
    finally:
        gate.write_text("go")  # item 0, and so the batch, ends only after the reader left
        _, err = parent.communicate(timeout=300)

    assert len(shown.splitlines()) == 1
    batch = json.loads(shown)["batch"] if flags else batch_id(shown)
    assert parent.returncode == 0, err  # the work's status: every item done
    assert err == ""  # no traceback, no "Exception ignored", no BrokenPipeError
    assert state(home, batch)["status"] == "done"
    rows = progress(home, batch)
    assert [r["stage"] for r in rows] == ["collected"] * 3
    assert {r["attempts"] for r in rows} == {1}
    assert all(runs_of(home, r["task_id"]) == 1 for r in rows)
    assert effects(tmp_path) == {"r00": 1, "r01": 1, "r02": 1}


def test_on_item_error_stop_leaves_the_rest_untouched(tmp_path: Path) -> None:
    items = edit_items(tmp_path, 4)
    (tmp_path / "repos" / "r01" / "f.txt").unlink()
    (tmp_path / "repos" / "r01" / "f.txt").mkdir()  # item 1's edit and check fail
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), "--concurrency", "1",
               "--on-item-error", "stop", cwd=tmp_path, home=home)
    assert done.returncode == 1, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    stages = [r["stage"] for r in progress(home, batch)]
    assert stages[:2] == ["collected", "collected"] and "untouched" in stages[2:]
    assert effects(tmp_path)["r03"] == 0
    assert state(home, batch)["status"] == "failed"
    assert 'left untouched (on_item_error = "stop": item 1 failed): items 2, 3' in done.stdout
    assert "budget" not in done.stdout


@pytest.mark.parametrize("bad", [
    ("--items", "missing.jsonl"),
    ("--items", "-", "--executor", "dask"),
    ("--items", "-", "--item-workspace", "tmp:x"),
])
def test_bad_batches_are_refused_in_one_line_before_a_batch_exists(
        tmp_path: Path, bad: tuple[str, ...]) -> None:
    edit_items(tmp_path, 1)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", *bad, cwd=tmp_path, home=home,
               input=(tmp_path / "items.jsonl").read_text())
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (home / "batches").exists()
