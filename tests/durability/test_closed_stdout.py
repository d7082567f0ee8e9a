"""`normalize run WF --json | head -1`: the reader leaves, the run ends `interrupted`, resumable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from durability_support import (
    PYTHON,
    append_action,
    cli,
    cli_env,
    journal,
    log_lines,
    only_task,
    steps_workflow,
    task_file,
)

from normalize.store import TaskStore

NAP = f'run {PYTHON} -c "import time; time.sleep(0.3)"'


@pytest.mark.parametrize("flags", [["--json"], []], ids=["json", "plain"])
def test_a_closed_stdout_interrupts_the_run_and_resume_finishes_it(
        tmp_path: Path, normalize_home: Path, flags: list[str]) -> None:
    flow = steps_workflow(tmp_path / "naps.toml", [
        ("nap", NAP), ("one", append_action("one")), ("nap-again", NAP),
        ("two", append_action("two")), ("last-nap", NAP)])
    # a real pipeline: normalize's stdout is the pipe `head -1` reads, and head alone holds it
    run = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "run", str(flow), *flags],
                           cwd=tmp_path, env=cli_env(normalize_home), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert run.stdout is not None
    head = subprocess.Popen(["head", "-1"], stdin=run.stdout, stdout=subprocess.PIPE, text=True)
    run.stdout.close()
    shown, _ = head.communicate(timeout=60)
    _, err = run.communicate(timeout=60)

    assert len(shown.splitlines()) == 1
    if flags:
        assert json.loads(shown)["type"] == "run_started"
    assert run.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert "BrokenPipeError" not in err
    task_id = only_task(normalize_home)
    assert f"resume with: normalize resume {task_id}" in err
    assert task_file(normalize_home, task_id)["status"] == "interrupted"
    events = journal(normalize_home, task_id)
    ended = events[-1]
    assert ended["type"] == "run_ended" and ended["status"] == "interrupted"
    assert ended["error"] == "stdout closed"
    assert any(e["type"] == "notice" and "Renderer was detached: it raised BrokenPipeError"
               in e["message"] for e in events)
    assert "two" not in log_lines(tmp_path)  # it stopped mid-run, at a safe point
    lock = TaskStore(normalize_home).lock(task_id)
    lock.acquire(epoch=0)  # free: nobody holds it
    lock.release()

    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert task_file(normalize_home, task_id)["status"] == "done"
    assert log_lines(tmp_path) == ["one", "two"]  # each side effect exactly once
