"""Ctrl-C and SIGTERM: a graceful stop on the first, an immediate one on the second."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from durability_support import (
    PYTHON,
    append_action,
    cli,
    json_lines,
    log_lines,
    only_task,
    spawn,
    steps_workflow,
    task_file,
    wait_for,
)

# A child that notes each signal it gets in signals.txt; `ignore` ones it then ignores.
CHILD = """
import os, signal, sys, time
ignore = set(sys.argv[1].split(',')) if len(sys.argv) > 1 and sys.argv[1] else set()
def note(num, frame):
    name = signal.Signals(num).name
    open('signals.txt', 'a').write(name + chr(10))
    if name not in ignore:
        sys.exit(1)
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, note)
open('child.pid', 'w').write(str(os.getpid()))
while not os.path.exists('go'):
    time.sleep(0.02)
open('log.txt', 'a').write('slow' + chr(10))
"""


def slow_flow(tmp_path: Path, ignore: str = "") -> Path:
    (tmp_path / "child.py").write_text(CHILD)
    return steps_workflow(tmp_path / "flow.toml", [
        ("first", append_action("first")),
        ("slow", f"run {PYTHON} child.py {ignore}".rstrip()),
        ("last", append_action("last")),
    ])


def start(tmp_path: Path, home: Path, ignore: str = "") -> subprocess.Popen[str]:
    proc = spawn("run", str(slow_flow(tmp_path, ignore)), "--json", cwd=tmp_path, home=home)
    wait_for(lambda: (tmp_path / "child.pid").exists(), what="the slow step's child started")
    return proc


def signals(tmp_path: Path) -> list[str]:
    path = tmp_path / "signals.txt"
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_gracefully_and_resume_says_the_outcome_is_unknown(
        tmp_path: Path, normalize_home: Path, sig: signal.Signals) -> None:
    proc = start(tmp_path, normalize_home)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert signals(tmp_path) == ["SIGINT"]  # the running child was asked first, with SIGINT
    assert "stopping — the running action is cancelled and the task saved as interrupted " \
           "(press again to stop at once)" in err
    events = json_lines(out)
    assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "interrupted"
    assert events[-1]["error"] == f"stopped by {sig.name}"
    assert any("outcome is unknown" in e.get("message", "") for e in events
               if e["type"] == "notice")
    task_id = only_task(normalize_home)
    saved = task_file(normalize_home, task_id)
    # the side effect was cut short: left in flight, exactly as a hard kill leaves it
    assert saved["status"] == "interrupted" and saved["inflight"] is not None
    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert "interrupted" in listed.stdout

    (tmp_path / "go").write_text("")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    again = json_lines(resumed.stdout)
    assert [e["status"] for e in again if e["type"] == "action_finished"][:1] == ["interrupted"]
    assert resumed.returncode == 1, resumed.stderr  # on_interrupt unset and no terminal: fail
    assert log_lines(tmp_path) == ["first"]  # neither `first` nor the slow step ran again


def test_a_child_that_ignores_sigint_gets_sigterm_after_the_grace_period(
        tmp_path: Path, normalize_home: Path) -> None:
    proc = start(tmp_path, normalize_home, ignore="SIGINT")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert signals(tmp_path) == ["SIGINT", "SIGTERM"]
    assert 2.5 < took < 10  # the grace period (3 s) before SIGTERM
    assert json_lines(out)[-1]["status"] == "interrupted"


def test_a_second_signal_stops_at_once_and_leaves_every_file_whole(
        tmp_path: Path, normalize_home: Path) -> None:
    proc = start(tmp_path, normalize_home, ignore="SIGINT,SIGTERM")
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: signals(tmp_path) == ["SIGINT"], what="the child got SIGINT")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 2.5  # well before SIGTERM's grace period ran out
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert signals(tmp_path) == ["SIGINT"]  # the child was killed (SIGKILL), not asked again
    task_id = only_task(normalize_home)
    tasks = normalize_home / "tasks"
    saved = json.loads((tasks / f"{task_id}.json").read_text())  # whole JSON
    assert saved["status"] == "interrupted"
    assert saved["error"] == "stopped at once by a second interrupt"
    for line in (tasks / f"{task_id}.jsonl").read_text().splitlines():
        json.loads(line)  # every journal line whole
    assert json_lines(out)[-1]["status"] == "interrupted"
    # the killed step was a side effect in flight: resume says its outcome is unknown
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    events = json_lines(resumed.stdout)
    assert [e["status"] for e in events if e["type"] == "action_finished"][:1] == \
        ["interrupted"]
    assert resumed.returncode == 1
    assert log_lines(tmp_path) == ["first"]
