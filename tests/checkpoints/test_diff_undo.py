"""`normalize diff` and `undo` over a scripted task that edits, creates and deletes files."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from checkpoint_helpers import Done, cli, edit, program, run_scripted

from normalize.events import CheckpointTaken

MAKE_AND_DELETE = "import os; open('new.txt', 'w').write('made by a program\\n'); " \
                  "os.remove('old.txt')"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def f():\n    return 1\n")
    (root / "old.txt").write_text("an old file\n")
    (root / "keep.txt").write_text("not the task's\n")
    return root


@pytest.fixture
def task(workspace: Path, normalize_home: Path) -> Done:
    """Step 1 edits calc.py; step 2 runs a program that creates new.txt and deletes old.txt."""
    done = run_scripted(workspace, normalize_home,
                        edit("calc.py", "    return 1", "    return 2"),
                        program(MAKE_AND_DELETE), "done changed three files")
    assert done.outcome.status.value == "done", done.outcome.error
    return done


def test_each_side_effect_and_the_start_is_a_checkpoint(task: Done) -> None:
    taken = [e for e in task.events if isinstance(e, CheckpointTaken)]
    assert [(e.step, e.kind) for e in taken] == [(0, "start"), (1, "action"), (2, "action")]
    assert taken[1].changes == {"calc.py": [1, 1]} and taken[1].key == "0.0"
    assert taken[2].changes == {"new.txt": [1, 0], "old.txt": [0, 1]}
    assert taken[2].files == 2 and taken[2].bytes == len("made by a program\n")
    assert all(e.ms > 0 for e in taken)  # what each checkpoint cost the step, in the events
    journaled = [e["type"] for e in task.store.events(task.task_id)]
    assert journaled.count("checkpoint_taken") == 3


def test_diff_shows_the_edit_the_created_and_the_deleted_file(
        task: Done, workspace: Path, normalize_home: Path) -> None:
    proc = cli("diff", task.task_id, cwd=workspace, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "-    return 1\n+    return 2" in out
    assert "+++ b/new.txt" in out and "+made by a program" in out
    assert "--- a/old.txt" in out and "-an old file" in out
    assert "keep.txt" not in out and "\033[" not in out  # plain in a pipe
    step = cli("diff", task.task_id, "2", "--stat", cwd=workspace, home=normalize_home)
    assert step.stdout.splitlines() == [" new.txt  +1 -0", " old.txt  +0 -1",
                                        " 2 files changed, +1 -1"]
    as_json = json.loads(cli("diff", task.task_id, "--json", cwd=workspace,
                             home=normalize_home).stdout)
    files = {f["path"]: f for f in as_json["files"]}
    assert files["new.txt"]["status"] == "added" and files["old.txt"]["status"] == "deleted"
    assert files["calc.py"]["hunks"][0]["lines"][-2:] == ["-    return 1", "+    return 2"]


def test_undo_restores_all_three_and_can_itself_be_undone(
        task: Done, workspace: Path, normalize_home: Path) -> None:
    proc = cli("undo", task.task_id, cwd=workspace, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "calc.py").read_text() == "def f():\n    return 1\n"
    assert (workspace / "old.txt").read_text() == "an old file\n"
    assert not (workspace / "new.txt").exists()
    assert (workspace / "keep.txt").read_text() == "not the task's\n"
    assert "undo this with `normalize undo" in proc.stdout
    said = proc.stdout.splitlines()  # what undo did to each file, in words
    assert {"restored calc.py", "restored old.txt", "removed new.txt"} <= set(said)
    assert f"task {task.task_id}: 3 files put back before the task" in proc.stdout
    again = cli("undo", task.task_id, "--to", "2", cwd=workspace, home=normalize_home)
    assert again.returncode == 0, again.stderr
    assert (workspace / "calc.py").read_text().endswith("return 2\n")
    assert (workspace / "new.txt").exists() and not (workspace / "old.txt").exists()


def test_undo_refuses_a_file_a_person_changed_and_force_restores_it(
        task: Done, workspace: Path, normalize_home: Path) -> None:
    (workspace / "calc.py").write_text("def f():\n    return 42  # mine\n")
    (workspace / "keep.txt").write_text("the person's own change\n")
    proc = cli("undo", task.task_id, cwd=workspace, home=normalize_home)
    assert proc.returncode == 1
    assert "refused calc.py: changed since task" in proc.stderr
    assert "return 42" in (workspace / "calc.py").read_text()  # left alone
    assert (workspace / "old.txt").exists() and not (workspace / "new.txt").exists()
    assert (workspace / "keep.txt").read_text() == "the person's own change\n"
    forced = cli("undo", task.task_id, "--force", cwd=workspace, home=normalize_home)
    assert forced.returncode == 0, forced.stderr
    assert (workspace / "calc.py").read_text() == "def f():\n    return 1\n"
    assert (workspace / "keep.txt").read_text() == "the person's own change\n"


def test_the_users_git_repository_is_never_touched(tmp_path: Path,
                                                   normalize_home: Path) -> None:
    import subprocess

    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "a.txt"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=root, check=True)
    before = {p.relative_to(root): p.stat().st_mtime_ns for p in (root / ".git").rglob("*")}
    done = run_scripted(root, normalize_home, edit("a.txt", "one", "two"), "done")
    assert done.of("checkpoint_taken") and not done.of("notice")
    after = {p.relative_to(root): p.stat().st_mtime_ns for p in (root / ".git").rglob("*")}
    assert after == before
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                            text=True, check=True)
    assert status.stdout == " M a.txt\n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_diff_is_coloured_on_a_terminal(task: Done) -> None:
    from normalize.cli.changes import show_diff
    from normalize.cli.console import Environment

    out = Terminal()
    env = Environment(stdout=out, stderr=io.StringIO(), env={"TERM": "xterm"})
    assert show_diff(env, task.task_id, 1, stat=False, json_output=False) == 0
    text = out.getvalue()
    assert "\033[32m+    return 2" in text and "\033[31m-    return 1" in text


def test_diff_of_a_step_that_does_not_exist_is_one_line(
        task: Done, workspace: Path, normalize_home: Path) -> None:
    proc = cli("diff", task.task_id, "7", cwd=workspace, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"normalize: error: step 7: task {task.task_id} has steps 0 to 2"]


def test_undo_never_writes_through_a_directory_turned_into_a_symlink(
        tmp_path: Path, normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "gone.txt").write_text("the task deletes me\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "made.txt").write_text("outside, not the task's\n")
    done = run_scripted(ws, normalize_home,
                        program("import os; os.remove('sub/gone.txt'); "
                                "open('sub/made.txt', 'w').write('made\\n')"), "done")
    (ws / "sub" / "made.txt").unlink()
    (ws / "sub").rmdir()
    os.symlink(outside, ws / "sub")  # a person (or a program) swaps the directory for a link
    proc = cli("undo", done.task_id, "--force", cwd=ws, home=normalize_home)
    assert proc.returncode != 0
    assert "refused sub/gone.txt: sub is a symlink or no longer a directory" in proc.stderr
    assert "refused sub/made.txt: sub is a symlink" in proc.stderr
    assert (outside / "made.txt").read_text() == "outside, not the task's\n"
    assert not (outside / "gone.txt").exists()
