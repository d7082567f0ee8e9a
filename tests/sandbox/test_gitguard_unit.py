"""The fingerprint itself on a real tree: what it finds, what it puts back, what it keeps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normalize.programs import trusted_dirs, trusted_program
from normalize.sandbox.gitguard import RACY_NS, GitGuard, RepoWalk


def _init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)


def _age(root: Path) -> None:
    """Date every directory's ctime out of the racy window (ctime moves with the clock only)."""
    ctimes = [os.lstat(d).st_ctime_ns for d, _, _ in os.walk(root)]
    deadline = max(ctimes) + RACY_NS + 50_000_000
    while time.time_ns() < deadline:  # a condition on the clock, not a guess at a duration
        time.sleep(0.05)


def test_a_repository_made_deep_in_a_remembered_tree_is_found_though_its_times_are_reset(
        tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    _age(tmp_path)
    walk = RepoWalk(tmp_path)
    assert walk.find() == []
    assert walk.find() == [] and walk.listed == 0  # nothing changed: nothing listed again
    stamp = os.stat(deep)
    _init(deep / "r")
    os.utime(deep, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # mtime set back; ctime cannot be
    assert walk.find() == ["a/b/c/r/.git"]


def test_a_changed_hook_mode_and_a_pointer_file_are_undone(tmp_path: Path) -> None:
    _init(tmp_path)
    hook = tmp_path / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(hook, 0o644)  # the person's hook, switched off
    guard = GitGuard(tmp_path)
    guard.before()
    os.chmod(hook, 0o755)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / ".git").write_text("gitdir: /tmp/elsewhere\n")
    changes = guard.after()
    assert {(c.path, c.what, c.done) for c in changes} == {
        (".git/hooks/post-checkout", "changed", "restored"), ("w/.git", "created", "removed")}
    assert os.stat(hook).st_mode & 0o777 == 0o644
    assert not os.path.lexists(tmp_path / "w" / ".git")


def test_a_deleted_repository_is_reported_not_rebuilt_and_a_normalize_dir_is(
        tmp_path: Path) -> None:
    _init(tmp_path / "sub")
    flows = tmp_path / ".normalize" / "workflows"
    flows.mkdir(parents=True)
    (flows / "w.toml").write_text("[workflow]\n")
    guard = GitGuard(tmp_path)
    guard.before()
    subprocess.run(["rm", "-rf", str(tmp_path / "sub" / ".git"), str(tmp_path / ".normalize")],
                   check=True)
    done = {c.path: c.done for c in guard.after()}
    assert done["sub/.git"].startswith("not restored")
    assert done[".normalize"] == "restored"
    assert (flows / "w.toml").read_text() == "[workflow]\n"


def test_a_new_repository_with_an_alias_is_not_inert(tmp_path: Path) -> None:
    guard = GitGuard(tmp_path)
    guard.before()
    _init(tmp_path / "clean")
    _init(tmp_path / "aliased")
    with open(tmp_path / "aliased" / ".git" / "config", "a") as fh:
        fh.write("[alias]\n\tst = !touch /tmp/never\n")
    assert [c.path for c in guard.after()] == ["aliased/.git"]
    assert (tmp_path / "clean" / ".git").is_dir() and not (tmp_path / "aliased" / ".git").exists()


def test_a_helper_is_never_taken_from_the_workspace_or_a_relative_path_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    planted = ws / ".venv" / "bin"
    planted.mkdir(parents=True)
    (planted / "git").write_text("#!/bin/sh\n")
    os.chmod(planted / "git", 0o755)
    monkeypatch.setenv("PATH", f"{planted}{os.pathsep}.venv/bin{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(ws)
    found = trusted_program("git", (ws,))
    assert found is not None and not found.startswith(str(ws))
    assert str(planted) not in trusted_dirs((ws,)) and ".venv/bin" not in trusted_dirs((ws,))
    monkeypatch.chdir(tmp_path)
    assert str(planted) not in trusted_dirs()  # below the current directory: refused too
    monkeypatch.chdir("/")  # started from / (a container's WORKDIR): the system dirs still count
    assert trusted_program("git") is not None


def test_the_data_home_inside_the_workspace_is_not_walked(tmp_path: Path) -> None:
    home = tmp_path / ".normalize-home"
    _init(home / "copies" / "child")
    _init(tmp_path / "mine")
    assert RepoWalk(tmp_path, (home,)).find() == ["mine/.git"]
    assert RepoWalk(tmp_path).find() == [".normalize-home/copies/child/.git", "mine/.git"]


def test_the_shadow_stores_git_runs_with_the_trusted_path_and_no_pager(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normalize.checkpoints.shadow import ShadowRepo

    ws = tmp_path / "ws"
    (ws / ".venv" / "bin").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{ws / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    repo = ShadowRepo(ws, tmp_path / "home")
    env = repo.env()
    assert str(ws) not in env["PATH"] and env["GIT_PAGER"] == "cat"
    assert not repo.git.startswith(str(ws))
    argv = repo._argv(["status"])
    for setting in ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.pager=cat",
                    "credential.helper=", "core.sshCommand=false", "protocol.allow=never"):
        assert setting in argv


def test_a_repository_in_a_directory_that_cannot_be_listed_is_still_found(
        tmp_path: Path) -> None:
    hidden = tmp_path / "d"
    _init(hidden)
    os.chmod(hidden, 0o311)  # searchable, not readable: `cd d && git status` still works
    try:
        if not os.access(hidden, os.R_OK):
            assert RepoWalk(tmp_path).find() == ["d/.git"]
            return
        # root reads every directory: walk in a child without the two capabilities that allow it
        drop = "-dac_override,-dac_read_search"
        code = ("import os, sys; from normalize.sandbox.gitguard import RepoWalk\n"
                "assert not os.access(sys.argv[1] + '/d', os.R_OK), 'still reads d'\n"
                "print(RepoWalk(__import__('pathlib').Path(sys.argv[1])).find())")
        seen = subprocess.run(["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}",
                               sys.executable, "-c", code, str(tmp_path)],
                              capture_output=True, text=True, timeout=60)
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.strip() == "['d/.git']"
    finally:
        os.chmod(hidden, 0o755)


def test_a_worktree_the_person_adds_meanwhile_is_kept_and_a_planted_module_hook_is_not(
        tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _init(ws)
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    guard = GitGuard(ws)
    guard.before()
    subprocess.run(["git", "-C", str(ws), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True, capture_output=True)
    module = ws / ".git" / "modules" / "m"
    (module / "hooks").mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    assert [(c.path, c.done) for c in guard.after()] == [(".git/modules/m", "removed")]
    assert (ws / ".git" / "worktrees" / "wt" / "commondir").exists()
    assert not module.exists()
