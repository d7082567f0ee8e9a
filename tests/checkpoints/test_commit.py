"""`normalize commit`: the task's net change as one commit on a branch of the person's repo."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from checkpoint_helpers import Done, cli, edit, program, run_scripted

MAKE_AND_DELETE = "import os; open('new.txt', 'w').write('made by a program\\n'); " \
                  "os.remove('old.txt')"
ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | ISOLATED
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True)
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A person's repository: their identity in its config, one commit, a clean tree."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Ada Person")
    git(root, "config", "user.email", "ada@example.test")
    (root / "calc.py").write_text("def f():\n    return 1\n")
    (root / "old.txt").write_text("an old file\n")
    (root / "keep.txt").write_text("not the task's\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


@pytest.fixture
def task(repo: Path, normalize_home: Path) -> Done:
    done = run_scripted(repo, normalize_home,
                        edit("calc.py", "    return 1", "    return 2"),
                        program(MAKE_AND_DELETE), "done changed three files")
    assert done.outcome.status.value == "done", done.outcome.error
    return done


def commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("commit", *args, cwd=repo, home=home, env=ISOLATED)


def untouched(repo: Path) -> tuple[str, str, str]:
    """What a commit must leave alone: the status, the index's bytes, the current branch."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    return git(repo, "status", "--porcelain=v1", "-uall"), index, git(repo, "branch",
                                                                          "--show-current")


def test_the_branch_holds_one_commit_whose_diff_is_the_tasks(
        task: Done, repo: Path, normalize_home: Path) -> None:
    (repo / "keep.txt").write_text("the person's own edit, in another file\n")
    before = untouched(repo)
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode == 0, proc.stderr
    branch = f"normalize/{task.task_id[:8]}"
    assert proc.stdout.startswith(f"branch {branch} at ")
    assert untouched(repo) == before  # working tree, index and HEAD's branch as they were
    assert git(repo, "rev-list", "--count", f"main..{branch}").strip() == "1"
    assert git(repo, "rev-parse", f"{branch}^").strip() == git(repo, "rev-parse", "main").strip()
    shown = cli("diff", task.task_id, cwd=repo, home=normalize_home).stdout
    assert shown and git(repo, "diff", "main", branch) == shown
    who = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", branch).strip()
    assert who == "Ada Person <ada@example.test>|Ada Person <ada@example.test>"
    trailer = git(repo, "log", "-1", "--format=%(trailers:key=Normalize-Task,valueonly)", branch)
    assert trailer.strip() == task.task_id
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "changed three files"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_unrelated_changes_in_the_tasks_files_are_refused_by_name(
        task: Done, repo: Path, normalize_home: Path) -> None:
    (repo / "calc.py").write_text("def f():\n    return 2\n# the person's own line\n")
    before = untouched(repo)
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode != 0
    assert "uncommitted changes that are not the task's in calc.py" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert git(repo, "branch", "--list", "normalize/*") == ""
    assert untouched(repo) == before


def test_a_staged_change_not_the_tasks_is_refused(
        task: Done, repo: Path, normalize_home: Path) -> None:
    (repo / "calc.py").write_text("def f():\n    return 3\n")
    git(repo, "add", "calc.py")
    (repo / "calc.py").write_text("def f():\n    return 2\n")  # the tree as the task left it
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode != 0 and "not the task's in calc.py" in proc.stderr


def test_push_sends_the_branch_to_a_local_bare_remote(
        task: Done, repo: Path, normalize_home: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", remote.as_uri())
    proc = commit(repo, normalize_home, task.task_id, "--branch", "fix/calc", "-m",
                  "Return two", "--push", "origin")
    assert proc.returncode == 0, proc.stderr
    assert "pushed fix/calc to origin" in proc.stdout
    made = git(repo, "rev-parse", "fix/calc").strip()
    assert git(remote, "rev-parse", "fix/calc").strip() == made
    assert git(remote, "log", "-1", "--format=%s", "fix/calc").strip() == "Return two"


def test_the_persons_hooks_run_and_a_refusing_hook_leaves_no_branch(
        task: Done, repo: Path, normalize_home: Path) -> None:
    hooks = repo / ".git" / "hooks"
    msg_hook = hooks / "commit-msg"
    msg_hook.write_text("#!/bin/sh\nprintf '\\nChecked-By: commit-msg\\n' >> \"$1\"\n")
    msg_hook.chmod(0o755)
    pre = hooks / "pre-commit"
    pre.write_text("#!/bin/sh\necho 'lint: calc.py is not formatted' >&2\nexit 1\n")
    pre.chmod(0o755)
    refused = commit(repo, normalize_home, task.task_id)
    assert refused.returncode != 0 and "lint: calc.py is not formatted" in refused.stderr
    assert git(repo, "branch", "--list", "normalize/*") == ""
    pre.unlink()
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode == 0, proc.stderr
    body = git(repo, "log", "-1", "--format=%B", f"normalize/{task.task_id[:8]}")
    assert "Checked-By: commit-msg" in body


def test_an_existing_branch_with_other_commits_is_refused(
        task: Done, repo: Path, normalize_home: Path) -> None:
    other = git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "elsewhere").strip()
    git(repo, "branch", "taken", other)
    proc = commit(repo, normalize_home, task.task_id, "--branch", "taken")
    assert proc.returncode != 0 and "branch taken already exists" in proc.stderr


def test_a_workspace_below_the_repositorys_root_commits_its_paths_from_the_root(
        repo: Path, normalize_home: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    (sub / "calc.py").write_text("def f():\n    return 1\n")
    (sub / "logo.bin").write_bytes(b"\x00\x01binary\xff")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pkg")
    make = "open('logo.bin', 'wb').write(bytes(range(256)))"
    done = run_scripted(sub, normalize_home, edit("calc.py", "    return 1", "    return 2"),
                        program(make), "done in pkg")
    assert done.outcome.status.value == "done", done.outcome.error
    proc = commit(sub, normalize_home, done.task_id, "--json")
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert made["branch"] == f"normalize/{done.task_id[:8]}"
    assert sorted(made["files"]) == ["calc.py", "logo.bin"]
    names = git(repo, "diff", "--name-only", "main", made["commit"]).split()
    assert names == ["pkg/calc.py", "pkg/logo.bin"]
    blob = subprocess.run(["git", "cat-file", "blob", f"{made['commit']}:pkg/logo.bin"],
                          cwd=repo, capture_output=True, check=True).stdout
    assert blob == bytes(range(256))


def test_agent_commit_makes_the_branch_when_the_task_is_done(
        repo: Path, normalize_home: Path, tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([edit("calc.py", "    return 1", "    return 2"),
                                   "done f returns 2"]))
    proc = cli("agent", "make f return 2", "--model", f"scripted:{replies}", "--json",
               "--commit", cwd=repo, home=normalize_home, env=ISOLATED)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout: events only
    task_id = events[0]["task_id"]
    branch = f"normalize/{task_id[:8]}"
    assert f"branch {branch} at " in proc.stderr
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "f returns 2"
    assert git(repo, "diff", "--name-only", "main", branch).split() == ["calc.py"]


def test_agent_commit_makes_no_branch_for_a_task_that_is_not_done(
        repo: Path, normalize_home: Path, tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([edit("calc.py", "    return 1", "    return 2"),
                                   "ask Should f return 2 or 3?"]))
    proc = cli("agent", "make f return 2", "--model", f"scripted:{replies}", "--commit",
               cwd=repo, home=normalize_home, env=ISOLATED)
    assert proc.returncode == 4, proc.stderr
    assert git(repo, "branch", "--list", "normalize/*") == ""


def test_a_workspace_outside_any_repository_is_one_clear_line(
        tmp_path: Path, normalize_home: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text("def f():\n    return 1\n")
    done = run_scripted(plain, normalize_home, edit("calc.py", "    return 1", "    return 2"),
                        "done")
    proc = commit(plain, normalize_home, done.task_id)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"normalize: error: {plain}: the task's workspace is not in a git repository"]


def test_a_change_already_in_head_has_nothing_to_commit(
        task: Done, repo: Path, normalize_home: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the person committed it")
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode == 2 and "HEAD already holds the task's change" in proc.stderr


AWS_KEY = "AKIA" + "IOSFODNN7EXAMPL3"


def test_the_message_is_made_from_the_redacted_summary(repo: Path, normalize_home: Path) -> None:
    done = run_scripted(repo, normalize_home, edit("calc.py", "    return 1", "    return 2"),
                        f"done used the key id_{AWS_KEY} to fix f")
    assert done.outcome.status.value == "done", done.outcome.error
    proc = commit(repo, normalize_home, done.task_id)
    assert proc.returncode == 0, proc.stderr
    body = git(repo, "log", "-1", "--format=%B", f"normalize/{done.task_id[:8]}")
    assert AWS_KEY not in body and "used the key id_[REDACTED] to fix f" in body
    named = commit(repo, normalize_home, done.task_id, "--branch", f"fix/{AWS_KEY}")
    assert named.returncode != 0 and "branch name holds what looks like a secret" in named.stderr
    assert git(repo, "branch", "--list", "fix/*") == ""


def test_a_commit_killed_in_a_hook_leaves_a_worktree_the_next_commit_removes(
        task: Done, repo: Path, normalize_home: Path, tmp_path: Path) -> None:
    import signal
    import sys
    import time

    started = tmp_path / "hook-started"
    pre = repo / ".git" / "hooks" / "pre-commit"
    pre.write_text(f"#!/bin/sh\ntouch '{started}'\nsleep 60\n")
    pre.chmod(0o755)
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home), **ISOLATED}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    killed = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", "commit",
                               task.task_id], cwd=repo, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the pre-commit hook never ran"
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
    listed = git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 2  # what the killed commit left, its branch checked out
    leftover = Path(listed.split("worktree ")[2].splitlines()[0])
    pre.unlink()
    proc = commit(repo, normalize_home, task.task_id)
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not leftover.parent.exists()
    branch = f"normalize/{task.task_id[:8]}"
    assert git(repo, "rev-list", "--count", f"main..{branch}").strip() == "1"


def test_a_workflows_commit_is_named_by_its_goal_not_its_status_line(
        repo: Path, normalize_home: Path) -> None:
    flow = repo.parent / "bump.toml"  # the person's workflow, outside the repository
    flow.write_text('[workflow]\nname = "bump"\n[[workflow.steps]]\nname = "bump"\n'
                    "action = \"edit calc.py <<EOF\\n<<<<<<< SEARCH\\n    return 1\\n=======\\n"
                    "    return 3\\n>>>>>>> REPLACE\\nEOF\"\n")
    ran = cli("run", str(flow), "--goal", "return three from f", "--json", cwd=repo,
              home=normalize_home, env=ISOLATED)
    assert ran.returncode == 0, ran.stderr
    task_id = json.loads(ran.stdout.splitlines()[0])["task_id"]
    proc = commit(repo, normalize_home, task_id)
    assert proc.returncode == 0, proc.stderr
    body = git(repo, "log", "-1", "--format=%B", f"normalize/{task_id[:8]}").strip()
    assert body.splitlines()[0] == "return three from f"  # the goal, not the status line
    assert body.splitlines()[2] == "its one step finished"  # which goes below it
    assert body.splitlines()[-1] == f"Normalize-Task: {task_id}"
