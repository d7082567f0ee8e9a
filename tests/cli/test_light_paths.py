"""`normalize tasks` and `resume` of a done task answer without loading the run machinery;
`resume` of a waiting workflow task loads only what its run uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

RUN_MACHINERY = ("normalize.engine", "normalize.runner", "normalize.events", "rich", "secrets")
# what a workflow that only notes and asks never uses: the LLM driver and its providers, the
# code tools (a repo map is built when a driver asks), batches, thread pools
NOT_FOR_A_WORKFLOW = ("normalize.drivers.llm", "normalize.providers", "normalize.tools.code",
                      "normalize.execution.context", "normalize.batch.manifest",
                      "concurrent.futures", "secrets")
PROBE = ("import sys\nfrom normalize.cli.app import main\n"
         "watched = sys.argv[1].split(',')\n"
         "status = main(sys.argv[2:])\n"
         "loaded = [m for m in watched if m in sys.modules]\n"
         "print('loaded', status, loaded)\n")


def probe(home: Path, *argv: str, watched: tuple[str, ...] = RUN_MACHINERY) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, ",".join(watched), *argv],
                          capture_output=True, text=True,
                          env={**os.environ, "NORMALIZE_HOME": str(home)}, timeout=60,
                          cwd=home, check=False)
    return proc.stdout.splitlines()[-1], proc.stderr


def test_listing_and_resuming_a_done_task_load_no_engine(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = Task.new("tidy the imports", str(tmp_path), "workflow", status=TaskStatus.DONE)
    store.create(task)
    listed, _ = probe(tmp_path, "tasks")
    assert listed == "loaded 0 []"
    listed, _ = probe(tmp_path, "tasks", watched=("normalize.task",))  # the index vouches
    assert listed == "loaded 0 []"
    resumed, stderr = probe(tmp_path, "resume", "last")
    assert resumed == "loaded 2 []"
    assert f"task {task.id} is already done" in stderr


def test_resuming_a_waiting_workflow_loads_only_what_it_runs(tmp_path: Path) -> None:
    flow = tmp_path / "asks.toml"
    flow.write_text('[workflow]\nname = "asks"\n\n[[workflow.steps]]\nname = "first"\n'
                    'action = "note step one"\n\n[[workflow.steps]]\nname = "ask"\n'
                    'action = "ask Go on?"\n')
    ran, stderr = probe(tmp_path, "run", str(flow), "-q")
    assert ran.startswith("loaded 4 "), stderr  # waiting (its first run also tried the sandbox)
    resumed, stderr = probe(tmp_path, "resume", "last", watched=NOT_FOR_A_WORKFLOW)
    assert resumed == "loaded 4 []", stderr  # resumed, asked again, waiting again


def test_the_console_script_leaves_its_objects_to_the_exit(tmp_path: Path) -> None:
    # the interpreter's last full collection would walk every loaded object for nothing
    code = ("import gc, sys\nfrom normalize.cli import entry\nsys.argv = ['normalize', 'tasks']\n"
            "status = entry.main()\nprint(status, gc.get_freeze_count() > 1000)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NORMALIZE_HOME": str(tmp_path)}, timeout=60,
                          cwd=tmp_path, check=False)
    assert proc.stdout.splitlines()[-1] == "0 True", proc.stderr


def test_a_workflow_run_before_is_not_parsed_again(tmp_path: Path) -> None:
    flow = tmp_path / "tiny.toml"
    flow.write_text('[workflow]\nname = "tiny"\n\n[[workflow.steps]]\nname = "first"\n'
                    'action = "note step one"\n')
    first, stderr = probe(tmp_path, "run", str(flow), "-q", watched=("tomllib",))
    assert first == "loaded 0 ['tomllib']", stderr
    again, stderr = probe(tmp_path, "run", str(flow), "-q", watched=("tomllib",))
    assert again == "loaded 0 []", stderr  # its data kept in the data home (workflow.parsed)
