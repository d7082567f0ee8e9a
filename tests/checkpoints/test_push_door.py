"""`normalize commit --push` starts git through normalize's door for programs: a remote
that hangs (its `pre-receive` hook never ends, and leaves a `setsid` child) holds the push
only until its time limit, which ends in one line, and nothing it started is left."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path

from checkpoint_helpers import Done, cli
from support import alive_with
from test_commit import ISOLATED, git, repo, task

__all__ = ["repo", "task"]  # the fixtures, shared with the commit tests

HANGING = """#!/bin/sh
setsid {python} -c 'import time; time.sleep(600)' {token} < /dev/null > /dev/null 2>&1 &
exec {python} -c 'import time; time.sleep(600)' {token}
"""


def test_a_push_to_a_hanging_remote_ends_at_its_time_limit_in_one_line(
        task: Done, repo: Path, normalize_home: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    token = f"push-{uuid.uuid4().hex}"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(HANGING.format(python=sys.executable, token=token))
    hook.chmod(0o755)
    git(repo, "remote", "add", "origin", remote.as_uri())
    began = time.monotonic()
    try:
        proc = cli("commit", task.task_id, "--branch", "fix/calc", "--push", "origin",
                   cwd=repo, home=normalize_home,
                   env={**ISOLATED, "CI": "true", "NORMALIZE_PUSH_TIMEOUT": "3"})
        took = time.monotonic() - began
        assert proc.returncode != 0
        said = proc.stderr.strip()
        assert "\n" not in said and "Traceback" not in said, said
        assert "branch fix/calc made" in said and "not pushed to origin" in said, said
        assert "no answer in 3 s" in said, said
        assert took < 20, took
        deadline = time.monotonic() + 5
        while alive_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(token) == [], "the remote's hook outlived the push"
    finally:
        for pid in alive_with(token):
            os.kill(pid, signal.SIGKILL)


def test_a_bad_time_limit_is_one_line_before_anything_is_made(
        task: Done, repo: Path, normalize_home: Path) -> None:
    proc = cli("commit", task.task_id, "--branch", "fix/calc", "--push", "origin", cwd=repo,
               home=normalize_home, env={**ISOLATED, "NORMALIZE_PUSH_TIMEOUT": "soon"})
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip() == "normalize: error: NORMALIZE_PUSH_TIMEOUT='soon': seconds, " \
                                  "more than 0", proc.stderr
    assert git(repo, "branch", "--list", "fix/calc") == ""


