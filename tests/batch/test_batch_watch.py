"""Watching and gathering a batch (`batch status`, `tasks show B/N`, `diff B/N`, `batch
collect`), its items' other workspaces (clone:, copy) and its budget (agent --items)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from batch_support import (
    WORKFLOW,
    batch_id,
    cli,
    edit_items,
    effects,
    git,
    items_file,
    needs_sandbox,
    progress,
    repos,
    state,
)

from normalize.testing.servers import FakeModelServer, Reply

pytestmark = needs_sandbox


def test_status_show_diff_and_collect_read_the_store(tmp_path: Path) -> None:
    items = edit_items(tmp_path, 3)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    status = cli("batch", "status", batch, cwd=tmp_path, home=home)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == f"batch {batch}: 3 items (3 done), $0.0000"
    assert lines[1].split() == ["item", "task", "status", "tries", "node", "turns", "cost",
                                "+/-"]
    first = lines[2].split()
    assert first[:4] == ["0", progress(home, batch)[0]["task_id"], "done", "1"]
    assert first[-2:] == ["+2", "-0"]  # its edit and its effect marker
    rows = [json.loads(line) for line in cli("batch", "status", batch, "--json", cwd=tmp_path,
                                             home=home).stdout.splitlines()]
    assert [r["status"] for r in rows] == ["done"] * 3 and rows[2]["added"] == 2
    show = cli("tasks", "show", f"{batch}/1", cwd=tmp_path, home=home)
    assert show.returncode == 0 and show.stdout.startswith(
        f"task {rows[1]['task_id']}  done"), show.stderr
    diff = cli("diff", f"{batch}/2", cwd=tmp_path, home=home)
    assert diff.returncode == 0 and "+word2" in diff.stdout, diff.stderr
    other = cli("diff", f"{batch}/{batch}", cwd=tmp_path, home=home)
    assert other.returncode != 0 and "is not an item of batch" in other.stderr
    out = tmp_path / "collected"
    gathered = cli("batch", "collect", batch, "-o", str(out), cwd=tmp_path, home=home)
    assert gathered.returncode == 0, gathered.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["item"]["word"] for r in results] == ["word0", "word1", "word2"]
    assert all(r["status"] == "done" and r["summary"] == "all 3 steps finished"
               for r in results)
    assert "+word1" in (out / results[1]["diff"]).read_text()
    with (out / "results.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["item.word"], r["status"], r["diff"]) for r in table] == \
        [(r["item"]["word"], "done", r["diff"]) for r in results]
    # from another data home, naming the store
    elsewhere = cli("batch", "status", batch, "--store", f"file://{home}", cwd=tmp_path,
                    home=tmp_path / "other")
    assert elsewhere.returncode == 0 and "3 done" in elsewhere.stdout, elsewhere.stderr


def test_clone_and_copy_workspaces_leave_the_originals_alone(tmp_path: Path) -> None:
    made = repos(tmp_path, 2)
    (tmp_path / "clone.toml").write_text(WORKFLOW.replace('"dir:{item.path}"',
                                                          '"clone:{item.repo}"'))
    rows = [{"repo": str(repo), "word": f"w{n}", "gate": ""} for n, repo in enumerate(made)]
    home = tmp_path / "home"
    done = cli("batch", "clone.toml", "--items", str(items_file(tmp_path / "i.jsonl", rows)),
               cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert effects(tmp_path) == {"r00": 0, "r01": 0}  # the originals untouched
    for row in progress(home, batch_id(done.stdout)):
        clone = Path(state(home, row["task_id"])["workspace"])
        assert clone.is_relative_to(home / "copies") and (clone / "effects.log").exists()
    # copy: each item in its own copy of the workspace the batch started in
    ws = made[0]
    (ws / "wf.toml").write_text(WORKFLOW.replace('workspace = "dir:{item.path}"\n', ""))
    git(ws, "add", "-A")
    lines = "".join(json.dumps({"word": f"c{n}", "gate": ""}) + "\n" for n in range(2))
    copied = cli("batch", "wf.toml", "--items", "-", cwd=ws, home=home, input=lines)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert not (ws / "effects.log").exists() and "c0" not in (ws / "f.txt").read_text()
    for row in progress(home, batch_id(copied.stdout)):
        copy = Path(state(home, row["task_id"])["workspace"])
        assert copy.name == ws.name and (copy / "f.txt").read_text().endswith(
            f"c{row['position']}\n")


def test_an_exhausted_budget_leaves_the_rest_untouched_and_exits_3(tmp_path: Path) -> None:
    # each item's one reply costs 5000 input tokens at $3/Mtok, and its output: about $0.02
    rows = [{"name": f"n{n}"} for n in range(5)]
    items = items_file(tmp_path / "items.jsonl", rows)
    (tmp_path / "a.txt").write_text("a\n")
    home = tmp_path / "home"
    with FakeModelServer() as server:
        server.add(*[Reply(f"done looked at {n}", usage={"input_tokens": 5000})
                     for n in range(5)])
        done = cli("agent", "--items", str(items), "look at {item.name}", "--budget", "0.085",
                   "--item-budget", "0.03", "--concurrency", "1", "--model",
                   "anthropic:claude-sonnet-4-5", "--approve", "yes", cwd=tmp_path,
                   home=home, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-test")
    assert done.returncode == 3, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    stages = [r["stage"] for r in progress(home, batch)]
    # about $0.02 spent per item; the fourth item's $0.03 would take the batch past $0.085
    assert stages == ["collected"] * 3 + ["untouched"] * 2
    assert "left untouched (the budget could not cover them): items 3, 4" in done.stdout
    assert len(server.requests) == 3
    assert "look at n1" in server.requests[1].last_message
    parent = state(home, batch)
    assert parent["status"] == "limit_reached" and parent["usage"]["cost_usd"] <= 0.085
    status = cli("batch", "status", batch, cwd=tmp_path, home=home).stdout
    assert "3 done, 2 untouched" in status.splitlines()[0]


def test_at_a_terminal_a_status_line_counts_the_items_and_ci_gets_plain_lines(
        tmp_path: Path) -> None:
    import os
    import pty
    import select
    import subprocess

    from batch_support import PY, env

    items = edit_items(tmp_path, 2)
    home = tmp_path / "home"
    main, side = pty.openpty()
    proc = subprocess.Popen([PY, "-m", "normalize.cli.app", "batch", "wf.toml", "--items",
                             str(items), "--concurrency", "1"], cwd=tmp_path,
                            env={**env(home), "TERM": "xterm", "COLUMNS": "120"},
                            stdin=side, stdout=side, stderr=side, start_new_session=True)
    os.close(side)
    seen = b""
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 120)
            assert ready, "the batch went quiet at its terminal"
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other side closed: the batch ended
                break
            if not chunk:
                break
            seen += chunk
    finally:
        proc.wait(60)
        os.close(main)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "1/2 done · 0 running · 0 failed · 0 waiting · $0.0000 · ETA 0m" in text
    assert "\r\x1b[2K" in text  # the line is redrawn in place, and cleared at the end
    plain = cli("batch", "wf.toml", "--items", str(items), cwd=tmp_path, home=home)
    assert "done ·" not in plain.stdout + plain.stderr and "\x1b" not in plain.stdout


def test_a_structured_result_is_a_column_per_field_in_the_csv() -> None:
    from normalize.batch.watch import csv_table

    header, table = csv_table([
        {"position": 0, "item": {"repo": "a"}, "result": {"ok": True, "files": ["x.py"]}},
        {"position": 1, "item": {"repo": "b", "extra": 2}, "result": None},
        {"position": 2, "item": {"repo": "c"}, "result": "plain"}])
    assert header == ["position", "item.repo", "result.ok", "result.files", "item.extra",
                      "result"]
    assert table == [["0", "a", "True", '["x.py"]', "", ""], ["1", "b", "", "", "2", ""],
                     ["2", "c", "", "", "", "plain"]]


def test_each_items_result_meets_the_output_schema_and_is_collected(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["size"],
                                  "properties": {"size": {"type": "integer"}}}))
    items = items_file(tmp_path / "items.jsonl", [{"name": "n0"}, {"name": "n1"}])
    (tmp_path / "a.txt").write_text("a\n")
    home = tmp_path / "home"
    with FakeModelServer() as server:
        server.add('done measured <<EOF\n{"size": "big"}\nEOF',  # refused: not an integer
                   'done measured <<EOF\n{"size": 3}\nEOF', 'done measured <<EOF\n{"size": 4}\nEOF')
        done = cli("agent", "--items", str(items), "measure {item.name}", "--output-schema",
                   str(schema), "--concurrency", "1", "--model", "anthropic:claude-sonnet-4-5",
                   "--approve", "yes", cwd=tmp_path, home=home, ANTHROPIC_BASE_URL=server.url,
                   ANTHROPIC_API_KEY="sk-ant-test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "'big' is not of type 'integer'" in server.requests[1].last_message
    out = tmp_path / "collected"
    gathered = cli("batch", "collect", batch_id(done.stdout), "-o", str(out), cwd=tmp_path,
                   home=home)
    assert gathered.returncode == 0, gathered.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["result"] for r in results] == [{"size": 3}, {"size": 4}]
    with (out / "results.csv").open(newline="") as handle:
        assert [r["result.size"] for r in csv.DictReader(handle)] == ["3", "4"]
    # a workflow no model drives gives no result: refused before a batch exists
    (tmp_path / "wf").mkdir()
    refused = cli("batch", "wf.toml", "--items", str(edit_items(tmp_path / "wf", 1)),
                  "--output-schema", str(schema), cwd=tmp_path / "wf", home=home)
    assert refused.returncode == 2 and "needs a workflow a model drives" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
