"""`resume ID --fork [--rewind STEP]`: a new task and workspace from a step; the original as is."""

from __future__ import annotations

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
    assert f"task {original}: forked as {fork['id']}" in forked.stderr
    assert (fork["parent"], fork["status"], fork["turn"]) == (original, "done", 5)
    copy = Path(fork["workspace"])
    assert copy.parent == normalize_home / "copies" / fork["id"]
    assert (copy / "a.txt").read_text() == "v4\n" and (ws / "a.txt").read_text() == "v4\n"
    shown = cli("diff", fork["id"], cwd=ws, home=normalize_home).stdout
    assert "-v3\n+v4" in shown  # it started from step 3's workspace
    assert task_state(normalize_home, original).get("children") == []  # not even listed there
    refused = cli("resume", original, "--fork", "--rewind", "9", cwd=ws, home=normalize_home)
    assert refused.returncode != 0 and "step 9: task" in refused.stderr
