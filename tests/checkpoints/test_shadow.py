"""The shadow store itself: incremental snapshots, counts, bulk import, cost, isolation."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normalize.checkpoints import ShadowRepo, WorkspaceCheckpoints
from normalize.checkpoints.shadow import BULK, Settings
from normalize.store import TaskStore
from normalize.task import Action, Task

REPO = Path(__file__).resolve().parents[2]


def test_the_listings_counts_match_a_tree_diff_over_random_changes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    rng = random.Random(15)
    names = [f"d{i % 4}/f{i}.txt" for i in range(30)]
    for name in names[:20]:
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text("".join(f"line {n}\n" for n in range(rng.randint(0, 9))))
    repo = ShadowRepo(ws, tmp_path / "home")
    before = repo.snapshot(full=True).tree
    for _ in range(12):
        time.sleep(0.01)
        for name in rng.sample(names, 5):
            path = ws / name
            if path.exists() and rng.random() < 0.3:
                path.unlink()
            else:
                path.parent.mkdir(exist_ok=True)
                path.write_text("".join(f"v{rng.randint(0, 3)} {n}\n"
                                        for n in range(rng.randint(0, 9))))
        snap = repo.snapshot()
        assert snap.base == before and snap.counts is not None
        assert snap.counts == repo.numstat(before, snap.tree)
        before = snap.tree


def test_a_first_snapshot_of_many_files_goes_through_one_pack(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for number in range(BULK * 3):
        (ws / f"m{number}.py").write_text(f"N = {number}\n")
    bad = os.fsdecode(b"caf\xe9.txt")  # a name that is not UTF-8
    (ws / bad).write_text("latin-1\n")
    repo = ShadowRepo(ws, tmp_path / "home")
    snap = repo.snapshot(full=True)
    assert len(repo.entries(snap.tree)) == BULK * 3 + 1 and bad in repo.entries(snap.tree)
    loose = list((repo.git_dir / "objects").glob("??/*"))
    assert len(loose) < 10  # the blobs are packed, not thousands of loose files
    assert list((repo.git_dir / "objects" / "pack").glob("*.pack"))


def test_the_recorder_never_writes_a_path_that_is_not_utf8_into_an_event(
        tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = TaskStore(tmp_path / "home")
    task = Task.new(goal="g", workspace=str(ws), driver="user")
    store.save(task)
    recorder = WorkspaceCheckpoints.for_workspace(ws, store.home, store.task_path)
    assert recorder is not None
    recorder.take(task)
    (ws / os.fsdecode(b"caf\xe9.txt")).write_text("x\n")
    events = recorder.take(task, Action("write", {}, text="write", key="0.0"))
    assert events[0].to_json()  # encodable as UTF-8
    assert list(events[0].changes) == ["caf\ufffd.txt"]  # type: ignore[attr-defined]


def test_the_users_git_environment_does_not_leak_in(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    decoy = tmp_path / "decoy.git"
    subprocess.run(["git", "init", "-q", "--bare", str(decoy)], check=True)
    monkeypatch.setenv("GIT_DIR", str(decoy))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "decoy-index"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/nowhere'")
    repo = ShadowRepo(ws, tmp_path / "home")
    snap = repo.snapshot(full=True)
    assert set(repo.entries(snap.tree)) == {"a.txt"}
    assert not (tmp_path / "decoy-index").exists()
    assert not list((decoy / "objects").glob("??"))
    assert not (repo.git_dir / "hooks").exists()


def test_size_bound_is_a_setting(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "small.bin").write_bytes(b"x" * 1000)
    (ws / "big.bin").write_bytes(b"x" * 3 * 1024 * 1024)
    settings = Settings.from_env({"NORMALIZE_CHECKPOINT_MAX_FILE_MB": "2"})
    repo = ShadowRepo(ws, tmp_path / "home", settings)
    snap = repo.snapshot(full=True)
    assert set(repo.entries(snap.tree)) == {"small.bin"}
    assert "over the 2 MB limit" in snap.skipped["big.bin"]


def test_the_bench_runs_and_prints_its_figures() -> None:
    """bench/checkpoints.py prints the figures the README reports (timing is the bench's job)."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "checkpoints.py"), "--steps",
                           "5"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = {name.strip(): value for name, value in (
        line.rsplit("  ", 1) for line in proc.stdout.splitlines() if "  " in line)}
    first = float(rows["first checkpoint, fresh store"].strip().split()[0].replace(",", ""))
    step = float(rows["checkpoint, one file changed: median"].strip().split()[0])
    assert first > 0 and step > 0, proc.stdout


def test_a_path_that_changes_between_listing_and_hashing_is_left_out(tmp_path: Path) -> None:
    """What update-index meets when a file became a FIFO or a directory after the listing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ok.txt").write_text("ok\n")
    os.mkfifo(ws / "pipe")
    (ws / "dir").mkdir()
    repo = ShadowRepo(ws, tmp_path / "home")
    repo.ensure()
    skipped: dict[str, str] = {}
    repo._update(["pipe", "ok.txt", "dir", "vanished.txt"], skipped)
    assert set(skipped) == {"pipe", "dir"}
    assert repo.run("ls-files").stdout == b"ok.txt\n"


def test_the_store_is_owner_only(tmp_path: Path) -> None:
    """It holds the workspace's file contents and the task's exact state."""
    import stat

    ws = tmp_path / "ws"
    ws.mkdir()
    for number in range(BULK + 5):  # the bulk path (a pack) too
        (ws / f"f{number}.txt").write_text(f"{number}\n")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    store = TaskStore(home)
    task = Task.new(goal="g", workspace=str(ws), driver="user")
    store.save(task)
    recorder = WorkspaceCheckpoints.for_workspace(ws, home, store.task_path)
    assert recorder is not None
    recorder.take(task)
    (ws / "f1.txt").write_text("changed\n")
    recorder.take(task, Action("write", {}, text="write", key="0.0"))
    recorder.settle(task)
    paths = [home / "workspaces", *(home / "workspaces").rglob("*")]
    assert len(paths) > 20
    for path in paths:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {mode:04o}"
