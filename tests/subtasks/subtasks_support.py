"""Helpers for the sub-task tests: a git workspace, scripted parents and children, the store."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support import wait_for as wait_for  # (shared: tests import it from here too)
from support.cli import cli as run_cli

from normalize.sandbox import probe

PY = sys.executable
VENV_BIN = str(Path(sys.executable).parent)

needs_sandbox = pytest.mark.skipif(not probe().available,
                                   reason=f"no sandbox here: {probe().reason}")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


def workspace(root: Path, files: dict[str, str]) -> Path:
    """A git repository holding `files` (committed) and a `.venv` the store leaves out."""
    ws = root / "ws"
    ws.mkdir()
    for name, text in files.items():
        (ws / name).write_text(text)
    (ws / ".gitignore").write_text(".venv/\n")
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "bin" / "tool").write_text("#!/bin/sh\n")
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "start")
    return ws


def tree_hash(root: Path) -> str:
    """A hash of every path, mode and byte under `root` (the person's `.git`)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        digest.update(f"{path.relative_to(root)}\0{st.st_mode}\0".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def script(path: Path, replies: list[str]) -> str:
    """A scripted model's file; the `--model` value naming it."""
    path.write_text(json.dumps(replies))
    return f"scripted:{path}"


def wait_program(gate: Path) -> str:
    """A reply running a program that waits for the file `gate`."""
    code = (f"import os, time; [time.sleep(0.02) for _ in iter(lambda: "
            f"os.path.exists({str(gate)!r}), True)]")
    return f'run {PY} -c "{code}"'


def append_program(log: str, word: str) -> str:
    """A reply running a program that appends `word` to the workspace file `log`."""
    code = f"open({log!r}, 'a').write({word!r} + chr(10))"
    return f'run {PY} -c "{code}"'


cli = partial(run_cli, drop=("NORMALIZE_",), term=None, env={"CI": "true"},
              first_on_path=VENV_BIN, timeout=120)
"""`normalize ARGS` (`support.cli`) as CI runs it: no NORMALIZE_ variable from outside, this
venv's bin first on PATH."""


def env(home: Path) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("NORMALIZE_")}
    full.update(NORMALIZE_HOME=str(home), CI="true",
                PATH=VENV_BIN + os.pathsep + full.get("PATH", ""))
    return full


def flow(path: Path, model: str, *, budget: float | None = None,
         prices: dict[str, float] | None = None) -> Path:
    """A workflow for a scripted parent: auto approvals, the model given.

    `prices` (model name: USD per million tokens of every kind) prices scripted usage.
    """
    provider, _, name = model.partition(":")
    limits = f"\n[workflow.limits]\nmax_cost_usd = {budget}\n" if budget is not None else ""
    priced = "".join(f'"{m}" = {{input = {p}, output = {p}, cache_read = {p}, '
                     f'cache_write = {p}}}\n' for m, p in (prices or {}).items())
    table = f"[workflow.llm.prices]\n{priced}" if priced else ""
    path.write_text(f'[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "{provider}"\n'
                    f'model = "{name}"\n{table}[workflow.permissions]\nmode = "yes"\n{limits}')
    return path


def task_state(home: Path, task_id: str) -> dict[str, Any]:
    from normalize.store import TaskStore

    return TaskStore(home).state(task_id)


def tasks(home: Path) -> list[dict[str, Any]]:
    from normalize.store import TaskStore

    store = TaskStore(home)
    ids = sorted(p.name[:-5] for p in (home / "tasks").glob("*.json"))
    return [store.state(i) for i in ids]


def journal(home: Path, task_id: str) -> list[dict[str, Any]]:
    lines = (home / "tasks" / f"{task_id}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
