"""`normalize tasks` and `resume` of a done task answer without loading the run machinery."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

PROBE = ("import sys\nfrom normalize.cli.app import main\n"
         "status = main(sys.argv[1:])\n"
         "loaded = [m for m in ('normalize.engine', 'normalize.runner', 'normalize.events', "
         "'rich', 'secrets') if m in sys.modules]\n"
         "print('loaded', status, loaded)\n")


def probe(home: Path, *argv: str) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          env={**os.environ, "NORMALIZE_HOME": str(home)}, timeout=60,
                          cwd=home, check=False)
    return proc.stdout.splitlines()[-1], proc.stderr


def test_listing_and_resuming_a_done_task_load_no_engine(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = Task.new("tidy the imports", str(tmp_path), "workflow", status=TaskStatus.DONE)
    store.create(task)
    listed, _ = probe(tmp_path, "tasks")
    assert listed == "loaded 0 []"
    resumed, stderr = probe(tmp_path, "resume", "last")
    assert resumed == "loaded 2 []"
    assert f"task {task.id} is already done" in stderr
