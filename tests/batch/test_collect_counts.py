"""`batch collect` counts each item's lines as `batch status` does."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from batch_support import batch_id, cli, items_file, needs_sandbox, repos

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


def test_collect_writes_the_counts_batch_status_shows(tmp_path: Path) -> None:
    (tmp_path / "wf.toml").write_text(REPLACE)
    rows = [{"path": str(repo.relative_to(tmp_path)), "word": f"line{n}"}
            for n, repo in enumerate(repos(tmp_path, 2))]
    items = items_file(tmp_path / "items.jsonl", rows)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    status = cli("batch", "status", batch, cwd=tmp_path, home=home).stdout.splitlines()
    assert [line.split()[-2:] for line in status[2:4]] == [["+1", "-1"], ["+1", "-1"]]
    out = tmp_path / "collected"
    assert cli("batch", "collect", batch, "-o", str(out), cwd=tmp_path, home=home).returncode == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["added"], r["removed"]) for r in results] == [(1, 1), (1, 1)]
    with (out / "results.csv").open(newline="") as handle:
        assert [(r["added"], r["removed"]) for r in csv.DictReader(handle)] == [("1", "1")] * 2


def test_each_items_line_names_the_item_and_a_model_free_batch_no_cost(tmp_path: Path) -> None:
    (tmp_path / "wf.toml").write_text(REPLACE)
    rows = [{"path": str(repo.relative_to(tmp_path)), "word": f"line{n}"}
            for n, repo in enumerate(repos(tmp_path, 2))]
    items = items_file(tmp_path / "items.jsonl", rows)
    done = cli("batch", "wf.toml", "--items", str(items), cwd=tmp_path, home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    items_said = sorted(line for line in lines if line.startswith("item "))
    assert [line.split()[:3] + line.split()[4:] for line in items_said] == [
        ["item", "0", "(repos/r00)", "done"], ["item", "1", "(repos/r01)", "done"]]
    assert "$" not in done.stdout and "attempt" not in done.stdout
    batch = batch_id(done.stdout)
    assert lines[-1] == f"batch {batch} done: 2 done"
    # the batch itself has no diff: its items have, and diff says how to see them
    whole = cli("diff", batch, cwd=tmp_path, home=tmp_path / "home")
    assert whole.returncode == 2
    assert whole.stderr.splitlines()[0] == (
        f"normalize: error: {batch} is a batch: each of its items changed its own files; "
        f"`normalize diff {batch}/N` for item N (`normalize batch status {batch}` lists them), "
        f"`normalize batch collect {batch} -o DIR` for every item's diff")
    assert "+line1" in cli("diff", f"{batch}/1", cwd=tmp_path, home=tmp_path / "home").stdout
