"""Fault injection: real `normalize` processes SIGKILLed at named points, then resumed.

Each case runs a three-step workflow whose middle step appends a line to a
file, kills the process at one point (`NORMALIZE_CRASH_AT`), and resumes the
task in a new process. Either the side effect happened exactly once, or the
task says plainly that its outcome is unknown — never twice, never silently.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from durability_support import (
    append_action,
    cli,
    journal,
    json_lines,
    log_lines,
    only_task,
    steps_workflow,
    task_file,
)

KILLED = -signal.SIGKILL


def three_steps(tmp_path: Path, on_interrupt: str | None = None) -> Path:
    extra = {"second": f'on_interrupt = "{on_interrupt}"\n'} if on_interrupt else None
    return steps_workflow(tmp_path / "flow.toml", [
        ("first", append_action("first")),
        ("second", append_action("second")),
        ("third", "view log.txt"),
    ], step_extra=extra)


def crash_then_resume(tmp_path: Path, home: Path, point: str,
                      on_interrupt: str | None = None,
                      ) -> tuple[str, object]:
    flow = three_steps(tmp_path, on_interrupt)
    crashed = cli("run", str(flow), "--json", cwd=tmp_path, home=home, crash=point)
    assert crashed.returncode == KILLED, crashed.stderr
    task_id = only_task(home)
    task_file(home, task_id)  # the task file is whole JSON after the kill
    listed = cli("tasks", "--json", cwd=tmp_path, home=home)
    assert [t["id"] for t in json_lines(listed.stdout)] == [task_id]
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=home)
    return task_id, resumed


@pytest.mark.parametrize("point", ["before_action@2", "checkpoint_append@1",
                                   "checkpoint_append@2", "checkpoint_append@3",
                                   "checkpoint_append@4", "checkpoint_write@2"])
def test_a_crash_before_the_side_effect_runs_it_exactly_once_on_resume(
        tmp_path: Path, normalize_home: Path, point: str) -> None:
    # the task file is written whole at the run's start (write 1) and end (write 2); the
    # checkpoints between are appended records: 1 before `first`, 2 after it, 3 before
    # `second`, 4 after it
    task_id, resumed = crash_then_resume(tmp_path, normalize_home, point)
    assert resumed.returncode == 0, resumed.stderr  # type: ignore[attr-defined]
    assert log_lines(tmp_path) == ["first", "second"]
    assert task_file(normalize_home, task_id)["status"] == "done"
    events = json_lines(resumed.stdout)  # type: ignore[attr-defined]
    assert not [e for e in events if e["type"] == "action_interrupted"]


@pytest.mark.parametrize("point", ["action_started@2", "action_ran@2"])
def test_a_crash_inside_the_side_effect_says_its_outcome_is_unknown(
        tmp_path: Path, normalize_home: Path, point: str) -> None:
    task_id, resumed = crash_then_resume(tmp_path, normalize_home, point)
    ran = point.startswith("action_ran")
    assert log_lines(tmp_path) == (["first", "second"] if ran else ["first"])  # never twice
    # without a terminal, on_interrupt defaults to "fail": the task fails and says why
    assert resumed.returncode == 1  # type: ignore[attr-defined]
    events = json_lines(resumed.stdout)  # type: ignore[attr-defined]
    interrupted = [e for e in events if e["type"] == "action_interrupted"]
    assert len(interrupted) == 1 and interrupted[0]["rerun"] is False
    assert "second" in interrupted[0]["command"]
    finished = [e for e in events if e["type"] == "action_finished"]
    assert finished[0]["status"] == "interrupted"
    assert finished[0]["data"] == {"outcome": "unknown"}
    assert events[-1]["status"] == "failed"
    assert "step 'second' failed: outcome unknown" in events[-1]["summary"]
    saved = task_file(normalize_home, task_id)
    assert saved["status"] == "failed" and saved["inflight"] is None
    shown = cli("tasks", "show", task_id, cwd=tmp_path, home=normalize_home)
    assert "outcome unknown" in shown.stdout


def test_on_interrupt_rerun_runs_a_never_started_effect_once(
        tmp_path: Path, normalize_home: Path) -> None:
    # killed after `second` was journaled as started but before it ran: rerun is safe here
    _, resumed = crash_then_resume(tmp_path, normalize_home, "action_started@2", "rerun")
    assert resumed.returncode == 0, resumed.stderr  # type: ignore[attr-defined]
    assert log_lines(tmp_path) == ["first", "second"]
    notices = [e["message"] for e in json_lines(resumed.stdout)  # type: ignore[attr-defined]
               if e["type"] == "notice"]
    assert "step 'second': running it again (on_interrupt = rerun)" in notices


def test_on_interrupt_rerun_after_the_effect_ran_runs_it_again(
        tmp_path: Path, normalize_home: Path) -> None:
    # the honest cost of `rerun`: an effect that did run is run a second time
    _, resumed = crash_then_resume(tmp_path, normalize_home, "action_ran@2", "rerun")
    assert resumed.returncode == 0  # type: ignore[attr-defined]
    assert log_lines(tmp_path) == ["first", "second", "second"]


@pytest.mark.parametrize(("answer", "status", "log"), [
    ("yes", 0, ["first", "second"]), ("no", 1, ["first"])])
def test_on_interrupt_ask_waits_for_yes_or_no(tmp_path: Path, normalize_home: Path,
                                              answer: str, status: int, log: list[str]) -> None:
    task_id, resumed = crash_then_resume(tmp_path, normalize_home, "action_started@2", "ask")
    assert resumed.returncode == 4, resumed.stderr  # type: ignore[attr-defined]
    waiting = [e for e in json_lines(resumed.stdout)  # type: ignore[attr-defined]
               if e["type"] == "waiting_for_input"]
    assert waiting[0]["kind"] == "interrupt"
    assert "outcome is unknown" in waiting[0]["question"]
    assert "--answer yes|no" in resumed.stderr  # type: ignore[attr-defined]
    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert "? step 'second' was running when normalize stopped" in listed.stdout
    answered = cli("resume", task_id, "--answer", answer, cwd=tmp_path, home=normalize_home)
    assert answered.returncode == status, answered.stderr
    assert log_lines(tmp_path) == log


def test_the_journal_records_a_side_effect_before_it_runs(tmp_path: Path,
                                                          normalize_home: Path) -> None:
    flow = three_steps(tmp_path)
    crashed = cli("run", str(flow), cwd=tmp_path, home=normalize_home, crash="action_started@2")
    assert crashed.returncode == KILLED
    task_id = only_task(normalize_home)
    events = journal(normalize_home, task_id)
    last = events[-1]
    assert last["type"] == "action_started" and last["read_only"] is False
    assert "second" in last["command"]
    saved = task_file(normalize_home, task_id)
    assert saved["status"] == "running"
    assert saved["inflight"]["decision"]["actions"][0]["key"] == last["key"]
    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert re.search(rf"! its process \(\d+\) is gone; `normalize resume {task_id}` recovers it",
                     listed.stdout), listed.stdout
    assert json_lines(cli("tasks", "--json", cwd=tmp_path, home=normalize_home).stdout)[0][
        "orphaned"] is True


def test_a_crash_mid_checkpoint_leaves_the_previous_file_and_no_debris(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = three_steps(tmp_path)
    # the last checkpoint's rewrite of the task file, after every step ran
    cli("run", str(flow), cwd=tmp_path, home=normalize_home, crash="checkpoint_write@2")
    task_id = only_task(normalize_home)
    tasks = normalize_home / "tasks"
    leftovers = list(tasks.glob(f".{task_id}.json*.tmp"))
    assert leftovers  # the half-written temporary file is all the kill left
    before = task_file(normalize_home, task_id)  # the file and the records appended after it
    assert before["status"] == "running" and before["turn"] >= 3  # every step checkpointed
    resumed = cli("resume", task_id, cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0
    assert log_lines(tmp_path) == ["first", "second"]
    assert not list(tasks.glob(f".{task_id}.json*.tmp"))  # swept by the next owner


def test_a_torn_checkpoint_record_is_skipped_and_the_one_before_it_used(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = three_steps(tmp_path)
    # killed halfway through the record that holds the decision to run `second`
    crashed = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home,
                  crash="checkpoint_append@3")
    assert crashed.returncode == KILLED
    task_id = only_task(normalize_home)
    log = (normalize_home / "tasks" / f"{task_id}.ckpt").read_bytes()
    assert log.count(b"\n") == 2 and not log.endswith(b"\n")  # two whole records, one torn
    saved = task_file(normalize_home, task_id)
    assert saved["turn"] == 1 and saved["inflight"] is None  # the record after `first`
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == ["first", "second"]  # `second` decided again, run once
    notices = [e["message"] for e in json_lines(resumed.stdout) if e["type"] == "notice"]
    assert any("checkpoint record was torn" in n for n in notices), notices
    assert task_file(normalize_home, task_id)["status"] == "done"
    assert not (normalize_home / "tasks" / f"{task_id}.ckpt").exists()  # folded into the file


def test_a_long_workflow_resumed_after_a_crash_runs_the_step_it_stopped_at(
        tmp_path: Path, normalize_home: Path) -> None:
    # the resumed driver decodes its steps from the stored spec one by one, as it reaches them
    names = [f"s{number:02d}" for number in range(1, 41)]
    flow = steps_workflow(tmp_path / "flow.toml",
                          [(name, append_action(name)) for name in names])
    # killed halfway through the checkpoint record of the decision to run s30
    crashed = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home,
                  crash="checkpoint_append@59")
    assert crashed.returncode == KILLED
    assert log_lines(tmp_path) == names[:29]
    task_id = only_task(normalize_home)
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == names  # s30 onwards, each once, in order
    started = [e["command"] for e in json_lines(resumed.stdout) if e["type"] == "action_started"]
    assert len(started) == 11 and "s30" in started[0]
