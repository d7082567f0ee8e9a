"""The batch's index of items: `batch status`, `collect` and `resume BATCH` read it in one pass,
say what reading every item's files would say, and fall back to those files where it is stale
or short."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from batch_support import batch_id, cli, items_file, needs_sandbox, progress, repos

pytestmark = needs_sandbox

REPLACE = """[workflow]
name = "replace"
workspace = "dir:{item.path}"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "replace"
action = "run sed -i 's/repo/{item.word}/' f.txt"
"""


def _batch(tmp_path: Path, count: int, **extra: str) -> tuple[Path, str, Any]:
    (tmp_path / "wf.toml").write_text(REPLACE)
    rows = [{"path": str(repo.relative_to(tmp_path)), "word": f"line{n}"}
            for n, repo in enumerate(repos(tmp_path, count))]
    items = items_file(tmp_path / "items.jsonl", rows)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), "--concurrency", "1", cwd=tmp_path,
               home=home, **extra)
    return home, batch_id(done.stdout), done


def _status(tmp_path: Path, home: Path, batch: str) -> list[dict[str, Any]]:
    out = cli("batch", "status", batch, "--json", cwd=tmp_path, home=home)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def _collected(tmp_path: Path, home: Path, batch: str, name: str) -> tuple[str, list[str]]:
    out = tmp_path / name
    done = cli("batch", "collect", batch, "-o", str(out), cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stderr
    diffs = sorted(p.read_text() for p in out.glob("*.diff"))
    return (out / "results.jsonl").read_text(), diffs


def _index(home: Path, batch: str) -> Path:
    return home / "batches" / batch / "index.jsonl"


def test_status_and_collect_read_the_index_and_say_what_the_items_files_say(
        tmp_path: Path) -> None:
    home, batch, done = _batch(tmp_path, 3)
    assert done.returncode == 0, done.stdout + done.stderr
    index = _index(home, batch)
    lines = [json.loads(line) for line in index.read_text().splitlines()]
    assert sorted(line["position"] for line in lines) == [0, 1, 2]
    with_index = _status(tmp_path, home, batch)
    assert [(r["status"], r["added"], r["removed"]) for r in with_index] == [("done", 1, 1)] * 3
    results, diffs = _collected(tmp_path, home, batch, "a")
    assert len(diffs) == 3 and all("+line" in d for d in diffs)
    # the same, read from every item's task and git (the index gone)
    kept = index.read_bytes()
    index.unlink()
    assert _status(tmp_path, home, batch) == with_index
    assert _collected(tmp_path, home, batch, "b") == (results, diffs)
    # what status shows comes from the index: a line changed there (its stamp kept) shows
    index.write_bytes(kept.replace(b'"note": ""', b'"note": "from the index"', 1))
    first = next(json.loads(line)["task_id"] for line in kept.splitlines()
                 if json.loads(line)["position"] == 0)
    assert [r["note"] for r in _status(tmp_path, home, batch)] == ["from the index", "", ""]
    # an item whose task changed since its line (resumed by hand) is read from its files
    task_file = home / "tasks" / f"{first}.json"
    later = task_file.stat().st_mtime_ns + 1_000_000_000
    os.utime(task_file, ns=(later, later))
    assert _status(tmp_path, home, batch) == with_index


def test_a_parent_killed_between_an_item_and_its_index_line_is_read_from_files_then_indexed(
        tmp_path: Path) -> None:
    home, batch, first = _batch(tmp_path, 3, NORMALIZE_CRASH_AT="batch_collected")
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    index = _index(home, batch)
    assert not index.exists() or not index.read_text()  # item 0 collected, not indexed
    assert progress(home, batch)[0]["stage"] == "collected"
    shown = _status(tmp_path, home, batch)
    assert (shown[0]["status"], shown[0]["added"], shown[0]["removed"]) == ("done", 1, 1)
    resumed = cli("resume", batch, cwd=tmp_path, home=home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = [json.loads(line) for line in index.read_text().splitlines()]
    assert sorted(line["position"] for line in lines) == [0, 1, 2]  # item 0 indexed at resume
    assert [(r["status"], r["added"]) for r in _status(tmp_path, home, batch)] == \
        [("done", 1)] * 3
