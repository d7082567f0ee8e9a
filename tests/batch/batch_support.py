"""Helpers for the batch tests: generated git repositories, a workflow with side effects, the CLI.

Each item's workflow appends one line to `effects.log` in its own workspace
(the marker of its side effect: a line per time it ran) and then checks its
edit. An item may wait for a gate file in HOME (one of the places outside its
workspace a sandboxed program still sees) before it ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import wait_for as wait_for  # (shared: tests import it from here too)

from normalize.sandbox import probe

PY = sys.executable
VENV_BIN = str(Path(sys.executable).parent)

needs_sandbox = pytest.mark.skipif(not probe().available,
                                   reason=f"no sandbox here: {probe().reason}")

WORKFLOW = """[workflow]
name = "edit"
workspace = "dir:{item.path}"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "edit"
action = "run sh -c 'echo {item.word} >> f.txt; echo once >> effects.log'"
[[workflow.steps]]
name = "wait"
on_interrupt = "rerun"  # waiting has no effect: a run cut short here is safe to run again
action = "run sh -c 'while [ -n \\"{item.gate}\\" ] && [ ! -e \\"{item.gate}\\" ]; do \
sleep 0.05; done'"
[[workflow.steps]]
name = "check"
action = "run grep -q {item.word} f.txt"
"""


GATED = """[workflow]
name = "three"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "edit"
action = "run sh -c 'echo edit >> effects.log'"
[[workflow.steps]]
name = "wait"
on_interrupt = "rerun"
action = "run sh -c 'while [ ! -e {gate} ]; do sleep 0.05; done'"
[[workflow.steps]]
name = "mark"
action = "run sh -c 'echo mark >> effects.log'"
"""
"""Three steps for one task's lease and fencing: an effect, a wait for the gate, an effect."""


def gated(root: Path, *, repository: bool = True) -> tuple[Path, Path, Path]:
    """A person's HOME, its gate file (not yet there) and a workspace `ws` with `wf.toml` of
    `GATED` (a git repository unless told otherwise), under `root`."""
    person = root / "person"
    person.mkdir()
    gate = person / "gate"
    ws = root / "ws"
    ws.mkdir()
    (ws / "wf.toml").write_text(GATED.replace("{gate}", str(gate)))
    if repository:
        git(ws, "init", "-q")
    return person, gate, ws


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


def repos(root: Path, count: int) -> list[Path]:
    """`count` git repositories, each with one committed file."""
    made = []
    for number in range(count):
        repo = root / "repos" / f"r{number:02d}"
        repo.mkdir(parents=True)
        (repo / "f.txt").write_text(f"repo {number}\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "start")
        made.append(repo)
    return made


def items_file(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def edit_items(root: Path, count: int, gates: dict[int, Path] | None = None) -> Path:
    """A workflow and an items file over `count` new repositories (in `root`)."""
    (root / "wf.toml").write_text(WORKFLOW)
    rows = [{"path": str(repo.relative_to(root)), "word": f"word{n}",
             "gate": str((gates or {}).get(n, ""))} for n, repo in enumerate(repos(root, count))]
    return items_file(root / "items.jsonl", rows)


def effects(root: Path) -> dict[str, int]:
    """Each repository's count of side effects (lines in its effects.log)."""
    return {repo.name: len((repo / "effects.log").read_text().splitlines())
            if (repo / "effects.log").exists() else 0
            for repo in sorted((root / "repos").iterdir())}


def env(home: Path, **extra: str) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("NORMALIZE_", "RAY_"))}
    full.update(NORMALIZE_HOME=str(home), CI="true",
                PATH=VENV_BIN + os.pathsep + full.get("PATH", ""))
    full.update(extra)  # a test may set PATH itself
    return full


def cli(*args: str, cwd: Path, home: Path, timeout: float = 300, input: str | None = None,
        **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "normalize.cli.app", *args], cwd=cwd,
                          env=env(home, **extra), capture_output=True, text=True,
                          timeout=timeout, input=input)


def start(*args: str, cwd: Path, home: Path, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-m", "normalize.cli.app", *args], cwd=cwd,
                            env=env(home, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def ended(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    """`proc`'s exit status and its output (stdout then stderr) once it ends; killed if it
    does not end in `timeout` seconds (the test then fails with the timeout)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out + err


def batch_id(stdout: str) -> str:
    """The batch id from the first line (`batch ID: …`)."""
    first = stdout.splitlines()[0]
    assert first.startswith("batch "), stdout
    return first.split()[1].rstrip(":")


def state(home: Path, task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "tasks" / f"{task_id}.json").read_text())
    return data


def progress(home: Path, batch: str) -> list[dict[str, Any]]:
    """Each item's progress, in order (`untouched` for one the parent never got to)."""
    where = home / "batches" / batch
    count = len(json.loads((where / "manifest.json").read_text())["items"])
    rows = []
    for number in range(count):
        path = where / "items" / f"{number:05d}.json"
        rows.append(json.loads(path.read_text()) if path.exists() else
                    {"position": number, "stage": "untouched", "attempts": 0, "task_id": ""})
    return rows


def runs_of(home: Path, task_id: str) -> int:
    """How many runs a task's journal records (its `run_started` events)."""
    path = home / "tasks" / f"{task_id}.jsonl"
    return sum(1 for line in path.read_text().splitlines()
               if line.strip() and json.loads(line).get("type") == "run_started")


def in_step(home: Path, task_id: str, key: str, run: int = 1) -> bool:
    """Whether the task's journal has the action `key` started in its `run`-th run.

    `key` may be `wait`: the wait step's action, under whatever key its run gave it.
    """
    path = home / "tasks" / f"{task_id}.jsonl"
    if not path.exists():
        return False
    runs = 0
    for line in path.read_text().splitlines():
        event = json.loads(line) if line.strip() else {}
        runs += event.get("type") == "run_started"
        if runs == run and event.get("type") == "action_started" \
                and key in (event["action"].get("key"), "wait" * ("while" in line)):
            return True
    return False
