"""The local executor on its own: its limit, collecting and cancelling real processes.

The jobs run a stand-in for `normalize` (a shell script given as the
executor's interpreter) that logs its start and end and waits for its gate.
"""

from __future__ import annotations

import threading
from pathlib import Path

from subtasks_support import wait_for

from normalize.execution.executor import ChildJob, JobState
from normalize.execution.local import LocalExecutor

STAND_IN = """#!/bin/sh
# argv: -m normalize.cli.app resume ID --quiet ...
echo "start $4" >> "$LOG"
while [ ! -e "$GATES/$4" ]; do sleep 0.02; done
echo "end $4" >> "$LOG"
"""


def executor(tmp_path: Path, limit: int) -> tuple[LocalExecutor, Path, Path]:
    program = tmp_path / "normalize-stand-in"
    program.write_text(STAND_IN)
    program.chmod(0o755)
    gates, log = tmp_path / "gates", tmp_path / "log"
    gates.mkdir()
    env = {"PATH": "/usr/bin:/bin", "LOG": str(log), "GATES": str(gates)}
    return LocalExecutor(limit, python=str(program), env=env), gates, log


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_at_most_limit_jobs_run_and_the_next_starts_when_one_ends(tmp_path: Path) -> None:
    local, gates, log = executor(tmp_path, 1)
    first = local.submit(ChildJob("aaaa", str(tmp_path)))
    wait_for(lambda: lines(log) == ["start aaaa"], 30, "the first job running")
    second: list[object] = []
    waiting = threading.Thread(target=lambda: second.append(
        local.submit(ChildJob("bbbb", str(tmp_path)))))
    waiting.start()
    waiting.join(1.0)  # bounded: with a free place the second would have started by now
    assert waiting.is_alive() and lines(log) == ["start aaaa"]
    assert local.watch(first) is JobState.RUNNING
    (gates / "aaaa").touch()
    assert local.collect(first, 30) == 0
    waiting.join(30)
    wait_for(lambda: lines(log)[-1:] == ["start bbbb"], 30, "the second job started")
    (gates / "bbbb").touch()
    assert local.collect(second[0], 30) == 0  # type: ignore[arg-type]
    assert lines(log) == ["start aaaa", "end aaaa", "start bbbb", "end bbbb"]


def test_a_cancelled_job_is_stopped_and_frees_its_place(tmp_path: Path) -> None:
    local, gates, log = executor(tmp_path, 1)
    job = local.submit(ChildJob("cccc", str(tmp_path)))
    wait_for(lambda: lines(log) == ["start cccc"], 30, "the job running")
    local.cancel(job)
    assert lines(log) == ["start cccc"]  # stopped, never reached its end
    again = local.submit(ChildJob("dddd", str(tmp_path)))  # its place is free again
    (gates / "dddd").touch()
    assert local.collect(again, 30) == 0
