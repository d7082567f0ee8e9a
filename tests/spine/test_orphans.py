"""A program left running by a killed normalize is stopped on resume, and said to be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from helpers import cli, json_lines

from normalize.tools.procs import same_process_alive, start_time


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_survivor_of_a_crash_is_stopped_on_resume(tmp_path: Path, normalize_home: Path) -> None:
    code = "import time; open('began', 'w').close(); time.sleep(120)"
    flow = tmp_path / "sleepy.toml"
    flow.write_text(f'''
[workflow]
name = "sleepy"

[workflow.permissions]
mode = "yes"
sandbox = "off"  # in the sandbox nothing outlives normalize (tests/sandbox/test_containment.py)

[[workflow.steps]]
name = "sleep"
action = """run {sys.executable} -c "{code}" """
on_interrupt = "fail"
''')
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home)}
    proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", "run", str(flow),
                             "--json"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "began").exists():
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no finalize, no cleanup
    out, _ = proc.communicate(timeout=30)
    task_id = json_lines(out)[0]["task_id"]
    journal = normalize_home / "tasks" / f"{task_id}.jsonl"
    spawned = [json.loads(line) for line in journal.read_text().splitlines()
               if '"process_started"' in line]
    assert len(spawned) == 1
    child = spawned[0]["pid"]
    assert _alive(child), "the child should have outlived normalize"

    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 1, resumed.stderr
    assert not _alive(child)
    events = json_lines(resumed.stdout)
    interrupted = [e for e in events if e["type"] == "action_finished"]
    assert interrupted[0]["status"] == "interrupted"
    assert f"its process {child} was still running and has been stopped" in \
        interrupted[0]["error"]


def test_a_reused_pid_is_left_alone() -> None:
    me = os.getpid()
    assert same_process_alive(me, start_time(me))
    assert not same_process_alive(me, (start_time(me) or 0) + 1)
    assert not same_process_alive(me, None)


def test_start_time_of_a_dead_process_is_unknown() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert start_time(child.pid) is None
