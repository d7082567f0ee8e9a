"""git as a test's author, and a workspace committed to a new repository."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """`git ARGS` in `cwd` as a test's author (checked); its stdout."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


def workspace(root: Path, files: Mapping[str, str], *, name: str = "ws",
              repo: bool = True) -> Path:
    """A directory `root/name` holding `files` (paths made), committed to a new git
    repository unless `repo` is False."""
    ws = root / name
    ws.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(text)
    if repo:
        git(ws, "init", "-q")
        git(ws, "add", "-A")
        git(ws, "commit", "-qm", "start")
    return ws
