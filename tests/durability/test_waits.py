"""Waits and answers: `ask` and approvals in CI (exit 4), at a terminal, and on resume."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from durability_support import (
    PYTHON,
    append_action,
    cli,
    cli_env,
    json_lines,
    log_lines,
    only_task,
    steps_workflow,
    task_file,
)


def ask_flow(tmp_path: Path) -> Path:
    return steps_workflow(tmp_path / "ask.toml", [
        ("before", append_action("before")),
        ("colour", "ask Which colour should the log get?"),
        ("after", append_action("{colour}")),
    ], step_extra={"colour": 'capture = "colour"\ntransform = "regex:answered: (.*)"\n'})


def test_a_waiting_task_in_ci_exits_4_then_resume_answer_finishes_it(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = ask_flow(tmp_path)
    proc = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 4, proc.stderr
    events = json_lines(proc.stdout)
    waiting = [e for e in events if e["type"] == "waiting_for_input"]
    assert [(w["kind"], w["question"]) for w in waiting] == [
        ("question", "Which colour should the log get?")]
    assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "waiting"
    assert events[-1]["exit_code"] == 4
    task_id = events[0]["task_id"]
    assert f"continue with: normalize resume {task_id} --answer TEXT" in proc.stderr

    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert "waiting" in listed.stdout and "? Which colour should the log get?" in listed.stdout
    as_json = json_lines(cli("tasks", "--json", cwd=tmp_path, home=normalize_home).stdout)
    assert as_json[0]["question"] == "Which colour should the log get?"

    again = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert again.returncode == 4  # still no answer: it waits again, and says so again
    assert [e["question"] for e in json_lines(again.stdout)
            if e["type"] == "waiting_for_input"] == ["Which colour should the log get?"]

    done = cli("resume", task_id, "--answer", "teal", "--json", cwd=tmp_path,
               home=normalize_home)
    assert done.returncode == 0, done.stderr
    received = [e for e in json_lines(done.stdout) if e["type"] == "input_received"]
    assert [r["answer"] for r in received] == ["teal"]
    assert log_lines(tmp_path) == ["before", "teal"]  # `before` did not run again
    assert task_file(normalize_home, task_id)["pending"] is None


def test_a_reply_that_does_not_fit_is_one_clear_line(tmp_path: Path,
                                                     normalize_home: Path) -> None:
    flow = ask_flow(tmp_path)
    task_id = json_lines(cli("run", str(flow), "--json", cwd=tmp_path,
                             home=normalize_home).stdout)[0]["task_id"]
    wrong = cli("resume", task_id, "--approve", cwd=tmp_path, home=normalize_home)
    assert wrong.returncode == 2  # --approve takes a MODE now, as in run and agent
    assert wrong.stderr.splitlines()[0] == (
        "normalize: error: option '--approve' requires an argument.")
    assert "answered with --answer yes|no" in wrong.stderr
    cli("resume", task_id, "--answer", "red", cwd=tmp_path, home=normalize_home)
    late = cli("resume", task_id, "--answer", "blue", cwd=tmp_path, home=normalize_home)
    assert late.returncode == 2
    assert "is already done" in late.stderr
    assert log_lines(tmp_path) == ["before", "red"]


def approval_flow(tmp_path: Path) -> Path:
    path = tmp_path / "approve.toml"
    path.write_text(f"""
[workflow]
name = "approve"
[workflow.permissions]
mode = "ask"
[[workflow.steps]]
name = "write"
action = '''{append_action("approved")}'''
""")
    return path


def test_an_approval_request_waits_then_approve_runs_the_effect_once(
        tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("run", str(approval_flow(tmp_path)), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 4, proc.stderr
    events = json_lines(proc.stdout)
    waiting = [e for e in events if e["type"] == "waiting_for_input"]
    assert waiting[0]["kind"] == "approval"
    assert "--answer yes|no" in proc.stderr
    assert log_lines(tmp_path) == []
    task_id = events[0]["task_id"]
    done = cli("resume", task_id, "--answer", "yes", "--json", cwd=tmp_path,
               home=normalize_home)
    assert done.returncode == 0, done.stderr
    started = [e for e in json_lines(done.stdout) if e["type"] == "action_started"]
    assert len(started) == 1 and started[0]["read_only"] is False  # journaled like any effect
    assert log_lines(tmp_path) == ["approved"]


def test_deny_blocks_the_effect(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("run", str(approval_flow(tmp_path)), "--json", cwd=tmp_path, home=normalize_home)
    task_id = json_lines(proc.stdout)[0]["task_id"]
    denied = cli("resume", task_id, "--answer", "no", cwd=tmp_path, home=normalize_home)
    assert denied.returncode == 1
    assert "denied by the user" in denied.stdout
    assert log_lines(tmp_path) == []


def _read_until(fd: int, needle: bytes, timeout: float = 30) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"never saw {needle!r} in {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_on_a_terminal_the_question_is_answered_at_the_prompt(tmp_path: Path,
                                                              normalize_home: Path) -> None:
    flow = ask_flow(tmp_path)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "run", str(flow), "--quiet"],
                            cwd=tmp_path, env=cli_env(normalize_home, {"TERM": "dumb"}),
                            stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    try:
        _read_until(leader, b"Which colour should the log get?")
        os.write(leader, b"amber\n")
        _read_until(leader, b"done")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    assert log_lines(tmp_path) == ["before", "amber"]


def test_on_a_terminal_an_interrupted_effect_is_asked_about_by_default(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = steps_workflow(tmp_path / "flow.toml", [("write", append_action("once"))])
    crashed = cli("run", str(flow), cwd=tmp_path, home=normalize_home, crash="action_started")
    assert crashed.returncode < 0
    task_id = only_task(normalize_home)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "resume", task_id, "--quiet"],
                            cwd=tmp_path, env=cli_env(normalize_home, {"TERM": "dumb"}),
                            stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    try:
        _read_until(leader, b"Run it again? (yes: run it again / no: count it as failed)")
        os.write(leader, b"yes\n")
        _read_until(leader, b"done")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    assert log_lines(tmp_path) == ["once"]
