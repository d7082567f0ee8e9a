"""Checkpoints go on through ignored, vanished, unreadable, odd and huge paths; tasks never fail."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from checkpoint_helpers import edit, program, run_scripted

from normalize.checkpoints import ShadowRepo
from normalize.events import CheckpointTaken, Notice

MB = 1024 * 1024


def stored(home: Path, ws: Path, task_id: str) -> set[str]:
    """The paths of the task's last checkpoint."""
    from normalize.checkpoints import read_steps

    repo = ShadowRepo(ws, home)
    return set(repo.entries(read_steps(repo, task_id)[-1].tree))


def test_ignored_deleted_unreadable_odd_and_huge_paths(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "gone").mkdir(parents=True)
    (ws / "gone" / "a.txt").write_text("a\n")
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "app.log").write_text("old log\n")
    (ws / "src.py").write_text("A = 1\n")
    (ws / "locked.txt").write_text("no one may read this\n")
    os.chmod(ws / "locked.txt", 0)
    os.symlink("does-not-exist", ws / "dangling")
    os.mkfifo(ws / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ws / "sock"))
    os.mkdir(ws / ".normalize")
    (ws / ".normalize" / "trust.toml").write_text("x = 1\n")
    try:
        done = run_scripted(
            ws, normalize_home,
            "Logs and builds.\nwrite build/out.txt <<EOF\nbuilt\nEOF",         # ignored
            edit("app.log", "old log", "new log"),                             # ignored
            program("import shutil; shutil.rmtree('gone')"),                  # deleted
            program(f"open('big.bin', 'wb').write(b'x' * {20 * MB})"),        # 20 MB
            program("import os; os.mkfifo('pipe2'); os.symlink('/etc', 'etc-link')"),
            edit("src.py", "A = 1", "A = 2"),
            "done")
    finally:
        server.close()
    assert done.outcome.status.value == "done", done.outcome.error
    taken = [e for e in done.events if isinstance(e, CheckpointTaken)]
    assert [e.step for e in taken] == [0, 1, 2, 3, 4, 5, 6]
    warnings = [e.message for e in done.events if isinstance(e, Notice) and e.level == "warning"]
    assert warnings == []
    assert taken[1].changes == {} and taken[2].changes == {}  # ignored: never stored
    assert taken[3].changes == {"gone/a.txt": [0, 1]}
    assert taken[4].changes == {} and taken[4].skipped == ["big.bin"]
    assert any("big.bin (20.0 MB, over the 10 MB limit)" in e.message
               for e in done.events if isinstance(e, Notice))
    assert taken[5].changes == {"etc-link": [1, 0]}
    assert taken[6].changes == {"src.py": [1, 1]}
    paths = stored(normalize_home, ws, done.task_id)
    assert {"src.py", ".gitignore", "dangling", "etc-link"} <= paths
    assert not paths & {"app.log", "build/out.txt", "big.bin", "pipe", "pipe2", "sock",
                        ".normalize/trust.toml", "gone/a.txt"}
    if os.geteuid() != 0:
        assert "locked.txt" not in paths  # unreadable: left out, not fatal


def test_a_file_that_vanishes_or_turns_into_a_fifo_between_steps(tmp_path: Path,
                                                                normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "x.txt").write_text("x\n")
    done = run_scripted(
        ws, normalize_home,
        "write y.txt <<EOF\ny\nEOF",
        program("import os; os.remove('x.txt'); os.mkfifo('x.txt'); os.remove('y.txt'); "
                "os.mkdir('y.txt')"),
        "done")
    assert done.outcome.status.value == "done"
    taken = [e for e in done.events if isinstance(e, CheckpointTaken)]
    assert taken[-1].changes == {"x.txt": [0, 1], "y.txt": [0, 1]}
    assert not [e for e in done.events if isinstance(e, Notice) and e.level == "warning"]


def test_a_workspace_inside_the_data_home_never_stores_the_data_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    home = ws / ".normalize-home"
    home.mkdir(parents=True)
    monkeypatch.setenv("NORMALIZE_HOME", str(home))
    # no program runs; read-only keeps the landlock tier's refusal of a data home in the
    # workspace (tests/sandbox/test_tiers.py) out of this checkpoint test
    done = run_scripted(ws, home, "write a.txt <<EOF\na\nEOF", "done", sandbox="read-only")
    assert stored(home, ws, done.task_id) == {"a.txt"}


def test_when_checkpoints_cannot_work_the_task_still_succeeds_with_one_warning(
        tmp_path: Path, normalize_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    normalize_home.mkdir(parents=True, exist_ok=True)
    (normalize_home / "workspaces").write_text("a file where the shadow stores would go\n")
    done = run_scripted(ws, normalize_home, "write a.txt <<EOF\na\nEOF",
                        "write b.txt <<EOF\nb\nEOF", "done")
    assert done.outcome.status.value == "done"
    assert (ws / "a.txt").exists() and (ws / "b.txt").exists()
    warnings = [e.message for e in done.events if isinstance(e, Notice) and e.level == "warning"]
    assert len(warnings) == 1 and "workspace checkpoint failed" in warnings[0]
    assert "workspaces" in warnings[0]
    assert not done.of("checkpoint_taken")


def test_checkpoints_can_be_turned_off(tmp_path: Path, normalize_home: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("NORMALIZE_CHECKPOINTS", "off")
    done = run_scripted(ws, normalize_home, "write a.txt <<EOF\na\nEOF", "done")
    assert done.outcome.status.value == "done" and not done.of("checkpoint_taken")
    assert not (normalize_home / "workspaces").exists()


def test_without_git_the_task_runs_with_one_warning(tmp_path: Path, normalize_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr("normalize.programs.SYSTEM_DIRS", (str(empty),))  # a machine without git
    done = run_scripted(ws, normalize_home, "write a.txt <<EOF\na\nEOF", "done")
    assert done.outcome.status.value == "done" and (ws / "a.txt").exists()
    warnings = [e.message for e in done.events if isinstance(e, Notice) and e.level == "warning"]
    assert len(warnings) == 1 and "git is not installed" in warnings[0]


def test_old_and_surplus_tasks_are_pruned(tmp_path: Path) -> None:
    from normalize.checkpoints.record import prune, task_ref
    from normalize.checkpoints.shadow import Settings

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    repo = ShadowRepo(ws, tmp_path / "home", Settings(keep_days=10, keep_tasks=2))
    tree = repo.snapshot(full=True).tree
    for name in ("t1", "t2", "t3"):
        repo.set_ref(task_ref(name), repo.commit(tree, None, {"task": name}))
        time.sleep(1.05)  # commit times are whole seconds
    assert prune(repo, now=time.time()) == ["t1"]  # the oldest, past the count
    assert prune(repo, now=time.time() + 11 * 86400) == ["t3", "t2"]  # past the age
    assert repo.read_ref(task_ref("t2")) is None
