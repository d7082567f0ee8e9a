"""A harness turn stopped midway (Ctrl-C, `kill -9`) resumes the harness's own session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from harness_support import HarnessSite, events_of, make_site, of_type

from normalize.runner import harness_state
from normalize.testing.servers import FakeModelServer, Reply, ToolUse


@pytest.fixture
def site(tmp_path: Path) -> HarnessSite:
    return make_site(tmp_path, "claude")


def wait_for(check: object, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def start(site: HarnessSite, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        site.argv(port, "agent", "--harness", "claude", "--json", "--base-url",
                  site.base_url(port), "fix add in calc.py"),
        cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def held_second_turn(ws: Path, release: threading.Event) -> list[Reply]:
    read = ToolUse("Read", {"file_path": f"{ws}/calc.py"})
    return [Reply("Reading calc.py first.", tools=(read,)),
            Reply("never seen", wait_for=release),
            Reply("Fixed it after the interruption.")]


def conversation(body: dict[str, object]) -> str:
    return json.dumps(body.get("messages"))


def recorded(*texts: str) -> bool:
    """Whether Claude Code's own session transcript (in the task's harness home) holds each
    of `texts` yet."""
    homes = harness_state(Path(os.environ["NORMALIZE_HOME"]), "any").parent  # one per task
    found = "".join(path.read_text(errors="replace")
                    for path in homes.glob("*/claude/.claude/projects/*/*.jsonl"))
    return all(text in found for text in texts)


def test_kill_9_mid_turn_then_resume_continues_the_harness_session(site: HarnessSite) -> None:
    release = threading.Event()
    with FakeModelServer(held_second_turn(site.ws, release)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc = start(site, port)
        try:
            wait_for(lambda: len(server.requests) >= 2, "claude's second request")
            # Claude Code writes its transcript a moment after the messages it holds: a kill
            # before that loses them from its session (on a busy machine, one run in six)
            wait_for(lambda: recorded("Reading calc.py first.", "return a - b"),
                     "the first reply and the tool's result in claude's transcript")
            proc.kill()  # SIGKILL: no ending is written
            proc.communicate(timeout=30)
        finally:
            release.set()
        resumed, events = site.run(port, "resume", "last", "--json")
        assert resumed.returncode == 0, resumed.stderr
    carried = conversation(server.requests[2].body)  # the first request after the resume
    assert "fix add in calc.py" in carried and "Reading calc.py first." in carried
    assert "interrupted" in carried  # and normalize told it the last turn was cut short
    ended = of_type(events, "run_ended")[-1]
    assert ended["status"] == "done" and "after the interruption" in ended["summary"]


def test_ctrl_c_interrupts_the_harness_and_saves_the_task_interrupted(
        site: HarnessSite) -> None:
    release = threading.Event()
    with FakeModelServer(held_second_turn(site.ws, release)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc = start(site, port)
        try:
            wait_for(lambda: len(server.requests) >= 2, "claude's second request")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            release.set()
    assert proc.returncode == 130, err
    ended = of_type(events_of(out), "run_ended")[-1]
    assert ended["status"] == "interrupted"
    assert of_type(events_of(out), "harness_session")  # named before the stop, journaled


def test_kill_9_mid_codex_turn_then_resume_continues_its_thread(tmp_path: Path) -> None:
    site = make_site(tmp_path, "codex")
    release = threading.Event()
    cat = Reply("", tools=(ToolUse("exec_command", {"cmd": "cat calc.py"}),))
    with FakeModelServer([cat, Reply("never seen", wait_for=release),
                          Reply("Fixed it after the interruption.")]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc = subprocess.Popen(
            site.argv(port, "agent", "--harness", "codex", "--model", "openai:gpt-5", "--json",
                      "--base-url", site.base_url(port, "/v1"), "fix add in calc.py"),
            cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(server.requests) >= 2, "codex's second request")
            proc.kill()
            proc.communicate(timeout=30)
        finally:
            release.set()
        resumed, events = site.run(port, "resume", "last", "--json")
        assert resumed.returncode == 0, resumed.stderr
    carried = json.dumps(server.requests[2].body["input"])
    assert "fix add in calc.py" in carried and "return a - b" in carried  # its earlier turn
    assert "interrupted" in carried
    assert of_type(events, "run_ended")[-1]["status"] == "done"
