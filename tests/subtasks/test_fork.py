"""`resume ID --fork [--rewind STEP]`: a new task and workspace from a step; the original as is."""

from __future__ import annotations

import json
from pathlib import Path

from subtasks_support import cli, flow, script, task_state, tasks, tree_hash, workspace


def test_a_fork_at_step_3_goes_on_in_its_own_copy_and_leaves_the_original_as_it_was(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "v0\n"})
    replies = [f"write a.txt <<EOF\nv{n}\nEOF" for n in (1, 2, 3, 4)] + ["done four"]
    wf = flow(tmp_path / "four.toml", script(tmp_path / "four.json", replies))
    ran = cli("run", str(wf), "--goal", "four versions", "-w", str(ws), cwd=ws,
              home=normalize_home)
    assert ran.returncode == 0, ran.stderr
    original = tasks(normalize_home)[0]["id"]
    files = [normalize_home / "tasks" / f"{original}{ext}" for ext in (".json", ".jsonl")]
    before = ([f.read_bytes() for f in files], tree_hash(ws))

    forked = cli("resume", original, "--fork", "--rewind", "3", cwd=ws, home=normalize_home)

    assert forked.returncode == 0, forked.stdout + forked.stderr
    assert ([f.read_bytes() for f in files], tree_hash(ws)) == before  # byte-identical
    fork = next(t for t in tasks(normalize_home) if t["id"] != original)
    assert f"task {original}: forked at step #3 as {fork['id']}" in forked.stdout
    assert (fork["parent"], fork["status"], fork["turn"]) == (original, "done", 5)
    copy = Path(fork["workspace"])
    assert copy.parent == normalize_home / "copies" / fork["id"]
    assert (copy / "a.txt").read_text() == "v4\n" and (ws / "a.txt").read_text() == "v4\n"
    shown = cli("diff", fork["id"], cwd=ws, home=normalize_home).stdout
    assert "-v3\n+v4" in shown  # it started from step 3's workspace
    assert task_state(normalize_home, original).get("children") == []  # not even listed there
    refused = cli("resume", original, "--fork", "--rewind", "9", cwd=ws, home=normalize_home)
    assert refused.returncode != 0 and "step 9: task" in refused.stderr


def test_a_fork_in_place_at_step_3_puts_the_files_back_and_leaves_the_task_file_as_it_was(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "v0\n"})
    replies = [f"write a.txt <<EOF\nv{n}\nEOF" for n in (1, 2, 3, 4)] + ["done four"]
    wf = flow(tmp_path / "four.toml", script(tmp_path / "four.json", replies))
    ran = cli("run", str(wf), "--goal", "four versions", "-w", str(ws), cwd=ws,
              home=normalize_home)
    assert ran.returncode == 0, ran.stderr
    original = tasks(normalize_home)[0]["id"]
    files = [normalize_home / "tasks" / f"{original}{ext}" for ext in (".json", ".jsonl")]
    before = [f.read_bytes() for f in files]
    alone = cli("resume", original, "--in-place", cwd=ws, home=normalize_home)
    assert alone.returncode == 2 and "--in-place goes with --fork" in alone.stderr

    (ws / "note.txt").write_text("mine\n")  # a file the task never touched stays as it is
    forked = cli("resume", original, "--fork", "--in-place", "--rewind", "3", "--json",
                 cwd=ws, home=normalize_home)

    assert forked.returncode == 0, forked.stdout + forked.stderr
    assert [f.read_bytes() for f in files] == before  # the original's files byte-identical
    fork = next(t for t in tasks(normalize_home) if t["id"] != original)
    assert (fork["parent"], fork["workspace"], fork["status"]) == (original, str(ws), "done")
    assert not (normalize_home / "copies").exists()  # no copy made
    steps = [json.loads(line) for line in forked.stdout.splitlines()
             if '"checkpoint_taken"' in line]
    assert [s["changes"] for s in steps if s["changes"]] == [{"a.txt": [1, 1]}]  # v3 to v4
    assert (ws / "a.txt").read_text() == "v4\n" and (ws / "note.txt").read_text() == "mine\n"
    shown = cli("diff", fork["id"], cwd=ws, home=normalize_home).stdout
    assert "-v3\n+v4" in shown  # its files were put back to step 3 before it went on

    (ws / "a.txt").write_text("a person's edit\n")
    refused = cli("resume", original, "--fork", "--in-place", "--rewind", "2", cwd=ws,
                  home=normalize_home)
    assert refused.returncode == 2 and "changed since the task last touched it: a.txt" in \
        refused.stderr, refused.stderr
    assert (ws / "a.txt").read_text() == "a person's edit\n"
    assert len(tasks(normalize_home)) == 2  # no fork made
