"""The `acp` driver: a real ACP agent (tests/acp/peer_agent.py, the SDK's agent side) takes
the turns of `normalize agent --harness acp:COMMAND`, and each file it reads or writes and
each command it runs is a normalize action of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from acp_support import lines, running_in

from normalize.store import TaskStore

PEER = Path(__file__).with_name("peer_agent.py")
BROKEN = "def mean(xs):\n    return sum(xs) / 0\n"
FIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"


def workspace(root: Path, *, slow: bool = False) -> Path:
    root.mkdir()
    (root / "calc.py").write_text(BROKEN)
    (root / "keep").mkdir()
    (root / "keep" / "file").write_text("mine\n")
    if slow:
        (root / "slow.py").write_text('import time\nopen("slow.log", "a").write("slow\\n")\n'
                                      'time.sleep(60)\n')
    return root


def normalize(*args: str, cwd: Path, home: Path, **popen: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    env.update(NORMALIZE_HOME=str(home), TERM="dumb")
    return subprocess.Popen([sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **popen)  # type: ignore[call-overload]


def harness(outside: Path) -> str:
    return f"acp:{sys.executable} {PEER} {outside}"


def finished(task_id: str) -> list[tuple[str, str]]:
    return [(e["command"].split("\n")[0], e["status"]) for e in TaskStore().events(task_id)
            if e["type"] == "action_finished"]


def test_each_read_write_and_command_of_the_agent_is_a_normalize_action(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    proc = normalize("agent", "--harness", harness(outside), "fix calc", "--json", cwd=repo,
                     home=normalize_home)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    task_id = events[0]["task_id"]
    calls = finished(task_id)
    assert [command.split()[0:2] for command, _ in calls] == [
        ["view", "calc.py"], ["write", "calc.py"], ["write", "notes.txt"],
        ["run", sys.executable], ["run", "rm"], ["run", sys.executable]]
    assert [status for _, status in calls] == [
        "success", "success", "success", "success", "blocked", "error"]
    assert (repo / "calc.py").read_text() == FIXED
    assert lines(repo / "ran.log") == 1
    assert (repo / "keep" / "file").exists()  # refused by the policy: never run
    assert not outside.exists()  # refused by the sandbox
    assert not outside.with_name("direct.txt").exists()  # the agent itself is sandboxed too
    said = "".join(e["text"] for e in events if e["type"] == "model_replied")
    assert "calc.py has 2 lines" in said and "outside: 1; direct: refused" in said
    assert any(e["type"] == "harness_session" for e in events)
    task = TaskStore().load(task_id)
    assert task.status.value == "done" and task.driver == "acp"

    # one checkpoint per write: the first write's step holds calc.py alone
    steps = [e for e in TaskStore().events(task_id)
             if e["type"] == "checkpoint_taken" and e["kind"] == "action"]
    assert [sorted(e["changes"]) for e in steps[:2]] == [["calc.py"], ["notes.txt"]]
    shown = normalize("diff", task_id, str(steps[0]["step"]), cwd=repo, home=normalize_home)
    diff, _ = shown.communicate(timeout=60)
    assert "calc.py" in diff and "notes.txt" not in diff
    back = normalize("undo", task_id, "--to", str(steps[0]["step"]), cwd=repo,
                     home=normalize_home)
    _, err = back.communicate(timeout=60)
    assert back.returncode == 0, err
    assert (repo / "calc.py").read_text() == FIXED and not (repo / "notes.txt").exists()

    # a follow-up is the next prompt, in the agent's own session loaded again
    more = normalize("resume", task_id, "note the follow-up", "--json", cwd=repo,
                     home=normalize_home)
    out, err = more.communicate(timeout=120)
    assert more.returncode == 0, err
    said = "".join(e["text"] for e in map(json.loads, out.splitlines())
                   if e["type"] == "model_replied")
    assert "loaded my session again" in said and "noted" in said
    assert (repo / "more.txt").read_text() == "the follow-up\n"
    assert finished(task_id)[-1] == ("write more.txt <<EOF", "success")


def test_what_the_agent_changes_inside_itself_is_a_step_of_its_own(
        tmp_path: Path, normalize_home: Path) -> None:
    """A tool call the agent runs itself gets a `record` action when it ends: its step holds
    what the call changed (from the last step on); a call that asked the client for a write
    is that action's step, a call that only read through the client is recorded still, and a
    call of the read kind records nothing."""
    repo = workspace(tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    first = normalize("agent", "--harness", harness(outside), "fix calc", "--json", cwd=repo,
                      home=normalize_home)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    task_id = json.loads(out.splitlines()[0])["task_id"]
    more = normalize("resume", task_id, "inside", "--json", cwd=repo, home=normalize_home)
    _, err = more.communicate(timeout=120)
    assert more.returncode == 0, err
    assert finished(task_id)[-5:] == [("record c-own: Write own.txt", "success"),
                                      ("write asked.txt <<EOF", "success"),
                                      ("record c-run: python3 -c …", "success"),
                                      ("view calc.py", "success"),
                                      ("record c-mixed: Copy calc.py", "success")]
    steps = [e for e in TaskStore().events(task_id)
             if e["type"] == "checkpoint_taken" and e["kind"] == "action"]
    assert [sorted(e["changes"]) for e in steps[-4:]] == [["own.txt"], ["asked.txt"],
                                                          ["own.log"], ["calc_copy.txt"]]
    own = str(steps[-4]["step"])
    shown = normalize("diff", task_id, own, cwd=repo, home=normalize_home)
    diff, err = shown.communicate(timeout=60)
    assert "+mine" in diff, err
    assert "asked.txt" not in diff and "own.log" not in diff
    back = normalize("undo", task_id, "--to", own, cwd=repo, home=normalize_home)
    _, err = back.communicate(timeout=60)
    assert back.returncode == 0, err
    assert (repo / "own.txt").read_text() == "mine\n"
    assert not (repo / "asked.txt").exists() and not (repo / "own.log").exists()
    assert not (repo / "calc_copy.txt").exists()


def test_a_kill_mid_turn_then_resume_finishes_the_task(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo", slow=True)
    outside = tmp_path / "outside.txt"
    proc = normalize("agent", "--harness", harness(outside), "fix calc", "--json", cwd=repo,
                     home=normalize_home)
    deadline = time.monotonic() + 90
    while lines(repo / "slow.log") < 1:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.05)
    assert proc.stdout is not None
    task_id = json.loads(proc.stdout.readline())["task_id"]
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)

    resumed = normalize("resume", task_id, "--json", cwd=repo, home=normalize_home)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert any(e["type"] == "action_interrupted" for e in events)
    assert "picking up after the interruption" in "".join(
        e["text"] for e in events if e["type"] == "model_replied")
    assert TaskStore().load(task_id).status.value == "done"
    # every effect once: the fix, the log, the slow run (cut short, never run again)
    assert (repo / "calc.py").read_text() == FIXED
    assert lines(repo / "ran.log") == 1 and lines(repo / "slow.log") == 1
    assert [p for p in running_in(repo) if "slow.py" in p or "peer_agent" in p] == []


def test_an_agent_that_is_missing_or_broken_is_said_in_one_line(tmp_path: Path,
                                                                normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    missing = normalize("agent", "--harness", "acp:no-such-agent --acp", "fix calc",
                        cwd=repo, home=normalize_home)
    _, err = missing.communicate(timeout=60)
    assert missing.returncode == 2 and "program not found: no-such-agent" in err
    assert not list(normalize_home.glob("tasks/*.json"))  # refused before any task
    crash = "import sys; sys.stderr.write('no such model'); sys.exit(3)"
    broken = normalize("agent", "--harness", f"acp:{sys.executable} -c \"{crash}\"",
                       "fix calc", cwd=repo, home=normalize_home)
    out, err = broken.communicate(timeout=120)
    assert broken.returncode != 0
    assert "did not start" in out + err and "no such model" in out + err, out + err
    assert (repo / "calc.py").read_text() == BROKEN
