"""`shadow.dot_git` says what git itself refuses as a path into a `.git`, spelling by spelling."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from normalize.checkpoints.shadow import dot_git

SPELLINGS = [".git", ".GIT", ".Git", ".gIt", ".git.", ".git..", ".git ", ".gIt  ", ".git. .",
             ".git::$DATA", ".git:x", "git~1", "GIT~1", "git~1.", "b\\.git\\c",
             # not .git to git: stored as any other name
             ".gitx", ".git~1", " .git", "git~2", "x.git", ".github", "git", ".gi t", "a:.git"]


@pytest.mark.parametrize("name", SPELLINGS)
def test_dot_git_refuses_what_git_refuses(tmp_path: Path, name: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    rel = f"pkg/{name}/f"
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text("x\n")
    subprocess.run(["git", "update-index", "--add", "-z", "--stdin"], cwd=tmp_path,
                   input=rel.encode() + b"\0", capture_output=True, check=True)
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=tmp_path, capture_output=True,
                            check=True).stdout
    git_refuses = listed == b""
    assert dot_git(rel) is git_refuses, (rel, git_refuses)
    assert dot_git(name) is git_refuses
