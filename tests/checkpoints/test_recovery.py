"""Checkpoints recover from a kill: a git lock a dead process left, an undo killed mid-file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkpoint_helpers import cli, edit, program, run_scripted

from normalize.checkpoints import ShadowRepo
from normalize.events import CheckpointTaken, Notice

HOLD_INDEX_LOCK = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from filelock import FileLock
    from normalize.checkpoints import ShadowRepo

    repo = ShadowRepo(Path(sys.argv[1]), Path(sys.argv[2]))
    repo.ensure()
    lock = FileLock(str(repo.root.parent / f"{repo.root.name}.lock"))
    if sys.argv[3] == "as-normalize":
        lock.acquire()  # what a checkpointing normalize holds while its git writes
    # git takes index.lock, then waits for paths on a stdin that never ends
    git = subprocess.Popen(repo._argv(["update-index", "--add", "-z", "--stdin"]),
                           cwd=repo.workspace, env=repo.env(), stdin=subprocess.PIPE)
    end = time.monotonic() + 30
    while not (repo.root / "index.lock").exists():
        assert git.poll() is None and time.monotonic() < end
        time.sleep(0.01)
    print("locked", flush=True)
    git.wait()
""")


def hold_index_lock(ws: Path, home: Path, how: str) -> subprocess.Popen[str]:
    """A process group whose git holds the shadow store's index.lock, blocked."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD_INDEX_LOCK, str(ws), str(home), how],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def kill_group(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)


@pytest.fixture
def ws(tmp_path: Path, normalize_home: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("x = 1\n")
    done = run_scripted(root, normalize_home, edit("calc.py", "x = 1", "x = 2"), "done")
    assert done.outcome.status.value == "done"
    return root


def test_a_kill_9_while_git_holds_index_lock_does_not_stop_the_next_task(
        ws: Path, normalize_home: Path) -> None:
    lock = ShadowRepo(ws, normalize_home).root / "index.lock"
    kill_group(hold_index_lock(ws, normalize_home, "as-normalize"))
    assert lock.exists()  # left behind by the dead git
    done = run_scripted(ws, normalize_home, edit("calc.py", "x = 2", "x = 3"), "done")
    warnings = [e.message for e in done.events if isinstance(e, Notice) and e.level == "warning"]
    assert warnings == []
    assert [e.message for e in done.of("notice")] == [
        f"cleared a git lock a dead process left in the shadow store: {lock}"]
    taken = [e for e in done.events if isinstance(e, CheckpointTaken)]
    assert [(e.kind, e.changes) for e in taken] == [("start", {}),
                                                    ("action", {"calc.py": [1, 1]})]
    proc = cli("diff", done.task_id, "--stat", cwd=ws, home=normalize_home)
    assert proc.stdout.splitlines()[0] == " calc.py  +1 -1", proc.stderr


def test_a_lock_a_live_git_still_holds_is_left_alone(ws: Path, normalize_home: Path) -> None:
    lock = ShadowRepo(ws, normalize_home).root / "index.lock"
    holder = hold_index_lock(ws, normalize_home, "orphan")  # its normalize died, git did not
    try:
        done = run_scripted(ws, normalize_home, edit("calc.py", "x = 2", "x = 3"), "done")
        assert lock.exists()
        assert any("workspace checkpoint failed" in e.message for e in done.of("notice")
                   if isinstance(e, Notice))
    finally:
        kill_group(holder)
    again = run_scripted(ws, normalize_home, edit("calc.py", "x = 3", "x = 4"), "done")
    assert not [e for e in again.of("notice") if isinstance(e, Notice) and e.level == "warning"]
    assert not lock.exists()


def test_an_undo_killed_mid_file_is_completed_by_a_plain_rerun(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("x = 1\n")
    (ws / "old.txt").write_text("old\n")
    done = run_scripted(ws, normalize_home, edit("calc.py", "x = 1", "x = 2"),
                        program("import os; os.remove('old.txt'); "
                                "open('new.txt', 'w').write('new\\n')"), "done")
    (ws / "calc.py").write_text("x = 2  # and the person's note\n")  # so undo needs --force
    killed = cli("undo", done.task_id, "--force", cwd=ws, home=normalize_home,
                 env={"NORMALIZE_CRASH_AT": "undo_write"})
    assert killed.returncode == -signal.SIGKILL
    assert (ws / "calc.py").read_text() == "x = 2  # and the person's note\n"  # never half
    rerun = cli("undo", done.task_id, cwd=ws, home=normalize_home)
    assert rerun.returncode == 0, rerun.stderr
    assert "completing the undo of task" in rerun.stderr
    assert (ws / "calc.py").read_text() == "x = 1\n"
    assert (ws / "old.txt").read_text() == "old\n" and not (ws / "new.txt").exists()
    assert sorted(os.listdir(ws)) == ["calc.py", "old.txt"]  # no temporary file left
    step = int(rerun.stdout.rsplit("--to ", 1)[1].split("`")[0])
    redo = cli("undo", done.task_id, "--to", str(step), cwd=ws, home=normalize_home)
    assert redo.returncode == 0, redo.stderr
    assert (ws / "new.txt").exists() and not (ws / "old.txt").exists()


def test_an_undo_journal_round_trips(tmp_path: Path, normalize_home: Path) -> None:
    from normalize.checkpoints.restore import UndoIntent, load_intent, save_intent

    repo = ShadowRepo(tmp_path, normalize_home)
    repo.private_dirs()
    intent = UndoIntent(task="t1", target=3, paths={"a.txt": "100644 " + "e" * 40, "b": ""},
                        before={"a.txt": "file " + "f" * 40, "b": "link " + "0" * 40})
    save_intent(repo, intent)
    assert load_intent(repo, "t1") == intent
    assert os.stat(repo.root / "undo" / "t1.json").st_mode & 0o777 == 0o600
