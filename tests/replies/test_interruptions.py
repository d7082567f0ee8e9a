"""One rule for interruptions: any stop during a side effect leaves its outcome unknown.

Real subprocesses, real signals: a graceful stop (one SIGINT) during a side effect is
followed by `on_interrupt` on resume, just as a hard kill is; after a crash in the middle
of an agent's decision, the model hears what happened before anything more of it runs;
Ctrl-C during a slow model reply stops within a second and leaves a resumable task.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
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
    wait_for,
)

from normalize.recovery import NOT_STARTED, OUTCOME_UNKNOWN
from normalize.testing.servers import FakeModelServer, Fault, Reply

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-test"}
MODEL = "anthropic:claude-sonnet-4-5"

# Counts its runs in runs.txt, then waits (up to 30 s) for the file `go`: a `run sleep 30`
# whose side effect can be counted and whose rerun can be let through.
SLEEPER = """
import os, sys, time
open('runs.txt', 'a').write('run' + chr(10))
deadline = time.monotonic() + 30
while not os.path.exists('go') and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def runs(workspace: Path) -> int:
    return len(log_lines(workspace, "runs.txt"))


def stop_during_side_effect(tmp_path: Path, home: Path, policy: str) -> str:
    """Run the sleeper step, SIGINT it once while it runs; the task id (exit 130 checked)."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    flow = steps_workflow(tmp_path / "flow.toml", [
        ("sleep", f"run {PYTHON} sleeper.py"),
        ("after", append_action("after")),
    ], step_extra={"sleep": f'on_interrupt = "{policy}"\n'})
    proc = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "run", str(flow), "--json"],
                            cwd=tmp_path, env=cli_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: runs(tmp_path) == 1, what="the side effect started")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert json_lines(out)[-1]["status"] == "interrupted"
    task_id = only_task(home)
    assert task_file(home, task_id)["inflight"] is not None  # left in flight, as by a kill
    (tmp_path / "go").write_text("")  # from now on the sleeper returns at once
    return task_id


def reported_unknown(events: list[dict[str, object]]) -> bool:
    interrupted = [e for e in events if e["type"] == "action_interrupted"]
    finished = [e for e in events if e["type"] == "action_finished"]
    return bool(interrupted) and interrupted[0]["rerun"] is False and \
        finished[0]["status"] == "interrupted" and finished[0]["error"] == OUTCOME_UNKNOWN


def test_one_sigint_then_resume_with_rerun_runs_it_again(
        tmp_path: Path, normalize_home: Path) -> None:
    task_id = stop_during_side_effect(tmp_path, normalize_home, "rerun")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert reported_unknown(json_lines(resumed.stdout))
    assert runs(tmp_path) == 2 and log_lines(tmp_path) == ["after"]


def test_one_sigint_then_resume_with_fail_does_not_run_it_again(
        tmp_path: Path, normalize_home: Path) -> None:
    task_id = stop_during_side_effect(tmp_path, normalize_home, "fail")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 1, resumed.stderr
    events = json_lines(resumed.stdout)
    assert reported_unknown(events)
    assert "outcome unknown" in str(events[-1]), events[-1]
    assert runs(tmp_path) == 1 and log_lines(tmp_path) == []


def test_one_sigint_then_resume_with_ask_waits_for_the_person(
        tmp_path: Path, normalize_home: Path) -> None:
    task_id = stop_during_side_effect(tmp_path, normalize_home, "ask")
    asked = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert asked.returncode == 4, asked.stderr  # waiting for an answer
    events = json_lines(asked.stdout)
    assert reported_unknown(events)
    waits = [e for e in events if e["type"] == "waiting_for_input"]
    assert "outcome is unknown" in str(waits[-1]["question"])
    assert runs(tmp_path) == 1
    again = cli("resume", task_id, "--answer", "yes", "--json", cwd=tmp_path,
                home=normalize_home)
    assert again.returncode == 0, again.stderr
    assert runs(tmp_path) == 2 and log_lines(tmp_path) == ["after"]


def agent_env(server: FakeModelServer) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": server.url, **KEYS}


def request_text(server: FakeModelServer, index: int) -> str:
    messages = server.requests[index].body["messages"]
    parts = []
    for message in messages:
        content = message["content"]
        parts.append(content if isinstance(content, str)
                     else "".join(str(c.get("text", "")) for c in content))
    return "\n".join(parts)


def test_a_kill_during_action_2_of_3_lets_the_model_decide_before_anything_else_runs(
        tmp_path: Path, normalize_home: Path, server: FakeModelServer) -> None:
    three = "\n".join([append_action("one"), append_action("two"), append_action("three")])
    server.add(f"Three steps.\n{three}")
    first = cli("agent", "log three words", "--json", "--approve", "yes", "--model", MODEL,
                cwd=tmp_path, home=normalize_home, env=agent_env(server),
                crash="action_started@2")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert log_lines(tmp_path) == ["one"]
    task_id = only_task(normalize_home)

    server.add("Two may or may not have run; I stop here.\ndone stopped after one")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home,
                  env=agent_env(server))
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == ["one"]  # `three` never ran: the model was asked first
    told = request_text(server, 1)
    section = told.split("## Results of your last commands", 1)[1]
    words = [w for w in ("one", "two", "three") if f"{w}` " in section]
    assert words == ["one", "two", "three"]
    two, three_part = section.split("three` ", 1)[0].split("two` ", 1)[1], \
        section.split("three` ", 1)[1]
    assert OUTCOME_UNKNOWN in two
    assert NOT_STARTED in three_part
    events = json_lines(resumed.stdout)
    kinds = [e["type"] for e in events]
    assert "action_started" not in kinds[: kinds.index("model_requested")]
    server.assert_done()


def test_a_kill_inside_an_llm_decide_step_lets_its_model_decide_first(
        tmp_path: Path, normalize_home: Path, server: FakeModelServer) -> None:
    flow = tmp_path / "think.toml"
    flow.write_text('[workflow]\nname = "think"\n[workflow.llm]\nprovider = "anthropic"\n'
                    'model = "claude-sonnet-4-5"\n[workflow.permissions]\nmode = "yes"\n'
                    '[[workflow.steps]]\naction = "llm-decide log three words"\n')
    three = "\n".join([append_action("one"), append_action("two"), append_action("three")])
    server.add(f"Three steps.\n{three}")
    first = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home,
                env=agent_env(server), crash="action_started@2")
    assert first.returncode == -signal.SIGKILL, first.stderr
    task_id = only_task(normalize_home)
    server.add("done stopped after one")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home,
                  env=agent_env(server))
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == ["one"]
    assert OUTCOME_UNKNOWN in request_text(server, 1)
    server.assert_done()


def test_a_kill_between_actions_runs_the_rest_as_the_run_would_have(
        tmp_path: Path, normalize_home: Path, server: FakeModelServer) -> None:
    three = "\n".join([append_action("one"), append_action("two"), append_action("three")])
    server.add(f"Three steps.\n{three}")
    first = cli("agent", "log three words", "--json", "--approve", "yes", "--model", MODEL,
                cwd=tmp_path, home=normalize_home, env=agent_env(server),
                crash="before_action@2")  # `one` finished, `two` never started
    assert first.returncode == -signal.SIGKILL, first.stderr
    task_id = only_task(normalize_home)
    server.add("done logged")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home,
                  env=agent_env(server))
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == ["one", "two", "three"]  # nothing unknown: the rest ran
    assert NOT_STARTED not in request_text(server, 1)
    server.assert_done()


def test_one_sigint_during_an_agents_side_effect_leaves_it_to_the_model(
        tmp_path: Path, normalize_home: Path, server: FakeModelServer) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    server.add(f"Sleep, then log.\nrun {PYTHON} sleeper.py\n{append_action('three')}")
    env = cli_env(normalize_home, agent_env(server))
    proc = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "agent", "sleep then log",
                             "--json", "--approve", "yes", "--model", MODEL], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: runs(tmp_path) == 1, what="the side effect started")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    task_id = only_task(normalize_home)
    (tmp_path / "go").write_text("")

    server.add("The sleep may not have finished; stopping.\ndone stopped")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home,
                  env=agent_env(server))
    assert resumed.returncode == 0, resumed.stderr
    told = request_text(server, 1).split("## Results of your last commands", 1)[1]
    sleeper, after = told.split("three` ", 1)
    assert OUTCOME_UNKNOWN in sleeper and NOT_STARTED in after
    assert runs(tmp_path) == 1 and log_lines(tmp_path) == []  # nothing ran again, or after
    server.assert_done()


def sigint_during_model_reply(tmp_path: Path, home: Path, server: FakeModelServer) -> float:
    """Start an agent, SIGINT it while the model is answering; seconds until it exited."""
    env = cli_env(home, agent_env(server))
    proc = subprocess.Popen([PYTHON, "-m", "normalize.cli.app", "agent", "look around",
                             "--json", "--model", MODEL], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: bool(server.requests), what="the model request arrived")
        time.sleep(0.3)  # well inside the slow reply
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
        took = time.monotonic() - sent
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert json_lines(out)[-1]["type"] == "run_ended"
    assert json_lines(out)[-1]["status"] == "interrupted"
    return took


@pytest.mark.parametrize("slow", [
    Reply("view .", delay=10),  # no response yet: the request waits for headers
    Fault.stall(after_text="Let me look", seconds=10),  # half a reply, then silence
], ids=["before-headers", "mid-stream"])
def test_ctrl_c_during_a_slow_model_reply_stops_within_a_second(
        tmp_path: Path, normalize_home: Path, server: FakeModelServer,
        slow: Reply | Fault) -> None:
    server.add(slow)
    took = sigint_during_model_reply(tmp_path, normalize_home, server)
    assert took < 1.0, f"took {took:.2f} s to stop"
    task_id = only_task(normalize_home)
    assert task_file(normalize_home, task_id)["status"] == "interrupted"
    server.add("done nothing to change")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home,
                  env=agent_env(server))
    assert resumed.returncode == 0, resumed.stderr
    assert json_lines(resumed.stdout)[-1]["summary"] == "nothing to change"
