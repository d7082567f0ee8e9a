"""An isolated child's merge lands whole or not at all: killed at many points, on a full disk.

The parent runs as its own `normalize` process; `NORMALIZE_CRASH_AT` makes it
SIGKILL itself at the N-th reach of a merge's crash point (`normalize.faults`),
then a plain `resume` must leave the workspace exactly as after the merge (the
child's work is never lost), with nothing in between and no stray file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from subtasks_support import PY, cli, env, flow, journal, needs_sandbox, script, task_state, tasks

MODIFIED = [f"m{n}.txt" for n in range(5)]
CREATED = ["n0.txt", "deep/a/n1.txt", "deep/a/n2.txt", "deep/b/n3.txt", "top/n4.bin", "n5.txt"]
REMOVED = "gone.txt"
BEFORE = {**{name: f"old {name}\n" * 50 for name in MODIFIED}, REMOVED: "bye\n",
          "keep.txt": "kept\n"}
REPEAT = 3000  # lines of each new content (tens of KB: a half-written file shows)


def new_text(rel: str) -> str:
    return f"{rel} by the child\n" * REPEAT


AFTER = {**{k: v for k, v in BEFORE.items() if k != REMOVED},
         **{rel: new_text(rel) for rel in [*MODIFIED, *CREATED]}}
STAGED, RENAMED = len(MODIFIED) + len(CREATED), len(MODIFIED) + len(CREATED) + 1


def child_program() -> str:
    """A reply running one program that changes the twelve paths."""
    names = [*MODIFIED, *CREATED]
    code = (f"import os; [os.makedirs(os.path.dirname(p) or '.', exist_ok=True) or "
            f"open(p, 'w').write((p + ' by the child' + chr(10)) * {REPEAT}) "
            f"for p in {names!r}]; os.remove({REMOVED!r})")
    return f'run {PY} -c "{code}"'


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def digest(files: dict[str, str]) -> dict[str, str]:
    return {k: hashlib.sha256(v.encode()).hexdigest() for k, v in files.items()}


def make_workspace(ws: Path) -> None:
    ws.mkdir(exist_ok=True)
    for name, text in BEFORE.items():
        (ws / name).write_text(text)


def parent_flow(tmp_path: Path, goal: str = "write twelve") -> Path:
    child = script(tmp_path / "child.json", [child_program(), "done wrote twelve"])
    parent = script(tmp_path / "parent.json", [
        f'spawn --isolated --model {child} "{goal}"', "done merged"])
    return flow(tmp_path / "parent.toml", parent)


def run_parent(wf: Path, ws: Path, home: Path, crash: str = ""
               ) -> subprocess.CompletedProcess[str]:
    full = env(home)
    if crash:
        full["NORMALIZE_CRASH_AT"] = crash
    return subprocess.run([PY, "-m", "normalize.cli.app", "run", str(wf), "--goal", "twelve",
                           "-w", str(ws)], cwd=ws, env=full, capture_output=True, text=True,
                          timeout=180)


def the_parent(home: Path) -> str:
    return next(t["id"] for t in tasks(home) if not t.get("parent"))


POINTS = ["merge_intent", *(f"merge_stage@{n}" for n in (1, 2, 3, 4, 6, 8, 10, STAGED)),
          "merge_staged", *(f"merge_rename@{n}" for n in (1, 2, 3, 4, 6, 8, 9, 10, 11, RENAMED))]


@needs_sandbox
@pytest.mark.parametrize("point", [*POINTS, "action_ran"])  # action_ran: merged, not journaled
def test_a_merge_killed_at_any_point_is_whole_after_resume(
        tmp_path: Path, normalize_home: Path, point: str) -> None:
    assert len(POINTS) == 20  # of the merge's own points
    ws = tmp_path / "ws"
    make_workspace(ws)
    before, after = digest(BEFORE), digest(AFTER)
    killed = run_parent(parent_flow(tmp_path), ws, normalize_home, crash=point)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)  # it died at that point
    parent = the_parent(normalize_home)
    assert task_state(normalize_home, parent)["status"] == "running"
    for rel, sha in hashes(ws).items():  # each file old or new, never cut short
        if not rel.endswith(".normalize-merge"):
            assert sha in (before.get(rel), after.get(rel)), rel
    resumed = cli("resume", parent, cwd=ws, home=normalize_home, timeout=180)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert hashes(ws) == after  # the child's work whole; no stray file, no half of one
    assert task_state(normalize_home, parent)["status"] == "done"
    events = journal(normalize_home, parent)
    collected = [e for e in events if e["type"] == "child_collected"]
    assert collected and collected[-1]["applied"] is True and not collected[-1]["conflicts"]
    spawned = [e for e in events if e["type"] == "action_finished" and e["tool"] == "spawn"]
    assert spawned[-1]["status"] == "success", spawned[-1]  # the re-run says it merged
    assert "gone.txt" in spawned[-1]["preview"]  # with the diff stat
    assert not list((normalize_home / "copies").iterdir())  # the copy, collected, is gone
    shown = cli("diff", parent, "--stat", cwd=ws, home=normalize_home)  # all of it the step's
    listed = {line.split()[0] for line in shown.stdout.splitlines()[:-1] if line.strip()}
    assert listed == {*MODIFIED, *CREATED, REMOVED}, shown.stdout
    undone = cli("undo", parent, cwd=ws, home=normalize_home)
    assert undone.returncode == 0, (undone.stdout, undone.stderr)
    assert hashes(ws) == before  # undo takes the whole merge back, and only it


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KB tmpfs (root only): the workspace fits, the child's changes do not."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@needs_sandbox
def test_a_full_disk_leaves_nothing_of_the_merge_and_the_parent_does_not_end_done(
        tmp_path: Path, normalize_home: Path, small_disk: Path) -> None:
    ws = small_disk / "ws"
    make_workspace(ws)
    wf = parent_flow(tmp_path)
    full = run_parent(wf, ws, normalize_home)
    assert full.returncode == 4, (full.stdout, full.stderr)  # waiting: not done, not 0
    parent = the_parent(normalize_home)
    state = task_state(normalize_home, parent)
    assert state["status"] == "waiting"
    assert "could not be applied to the workspace" in full.stdout + full.stderr
    assert "No space left on device" in state["pending"]["question"]
    assert hashes(ws) == digest(BEFORE)  # nothing of it: no file, no temporary, no directory
    assert not (ws / "deep").exists()
    kid = next(t for t in tasks(normalize_home) if t.get("parent") == parent)
    assert Path(kid["workspace"]).is_dir()  # the copy stays for the retry
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    again = cli("resume", parent, cwd=ws, home=normalize_home, timeout=180)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert hashes(ws) == digest(AFTER)
    assert task_state(normalize_home, parent)["status"] == "done"


DOT_GITS = ["pkg/.GIT/config", "pkg/.Git/HEAD", "pkg/.git./config", "pkg/.git /hooks"]


@needs_sandbox
def test_a_childs_git_spellings_are_left_out_and_the_rest_lands(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    make_workspace(ws)
    names = [*DOT_GITS, "pkg/ok.txt"]
    # each write on its own: the write guard refuses the spellings it knows at the call (the
    # program goes on); what it lets through is left out of the child's diff
    lines = ["import os, sys", "for p in sys.argv[1:]:", " try:",
             "  os.makedirs(os.path.dirname(p), exist_ok=True)",
             "  open(p, chr(119)).write(chr(120) + chr(10))", " except OSError:", "  pass"]
    code = f"exec(chr(10).join({lines!r}))"
    paths = " ".join(f'"{name}"' for name in names)
    child = script(tmp_path / "child.json", [f'run {PY} -c "{code}" {paths}', "done wrote"])
    parent = script(tmp_path / "parent.json", [
        f'spawn --isolated --model {child} "write pkg"', "done merged"])
    done = cli("run", str(flow(tmp_path / "parent.toml", parent)), "--goal", "pkg", "-w",
               str(ws), cwd=ws, home=normalize_home)
    assert done.returncode == 0, (done.stdout, done.stderr)
    events = journal(normalize_home, the_parent(normalize_home))
    finished = [e for e in events if e["type"] == "action_finished" and e["tool"] == "spawn"]
    assert finished[0]["status"] == "success", finished[0]
    assert finished[0]["data"]["applied"] is True
    assert "invalid path" not in json.dumps(finished[0])
    assert (ws / "pkg" / "ok.txt").read_text() == "x\n"
    assert sorted(p.name for p in (ws / "pkg").iterdir()) == ["ok.txt"]


def test_a_best_of_n_pick_that_does_not_fit_writes_nothing_and_waits(
        tmp_path: Path, normalize_home: Path, small_disk: Path) -> None:
    ws = small_disk / "ws"
    make_workspace(ws)
    big = "\n".join(f"line {n} of the attempt" for n in range(20000))
    models = [script(tmp_path / f"try{n}.json", [
        f"write big{n}.txt <<EOF\n{big}\nEOF", "done"]) for n in (1, 2)]
    ran = cli("agent", "--attempts", "2", "--model", ",".join(models), "--approve", "yes",
              "-w", str(ws), "grow", cwd=ws, home=normalize_home, timeout=180)
    assert ran.returncode == 4, (ran.stdout, ran.stderr)
    parent = the_parent(normalize_home)
    assert task_state(normalize_home, parent)["status"] == "waiting"
    assert "No space left on device" in ran.stdout + ran.stderr
    assert hashes(ws) == digest(BEFORE)
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    again = cli("resume", parent, cwd=ws, home=normalize_home, timeout=180)
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert (ws / "big1.txt").read_text() == big + "\n"  # the first of two equal diffs
    assert hashes(ws) == {**digest(BEFORE), "big1.txt": digest({"b": big + "\n"})["b"]}
