"""The `acp` driver with real ACP agents: Zed's `claude-code-acp` and its successor
`claude-agent-acp` (npm, pinned in scripts/test) against normalize's local Anthropic server,
with scripted replies.

The agent's model asks for its ACP tools (`mcp__acp__Write`, `mcp__acp__Bash`), which the
agent serves through the client's `fs/write_text_file` and `terminal/create`: normalize
runs each as an action of its own. The agent gets its key, its home and its model server the
way the claude harness does (normalize/tools/harness/agents.py); the model host's name is
pinned to the local server for normalize's proxy (tests/sandbox/pinned_normalize.py).

`claude-agent-acp` asks the client for none of it: its Write and Bash run inside the agent
(in normalize's sandbox), and normalize sees them as the agent's tool calls only; so does
Zed's `codex-acp` (on Codex, against the local Responses API) with its commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp_support import running_in

from normalize.store import TaskStore
from normalize.testing.servers import FakeModelServer, Reply, ToolUse

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".ci" / "harnesses" / "node_modules" / ".bin"
AGENT = BIN / "claude-code-acp"
NEWER = BIN / "claude-agent-acp"
CODEX = BIN / "codex-acp"
LAUNCHER = REPO / "tests" / "sandbox" / "pinned_normalize.py"
HOST = "api.harness.test"
HAIKU = "claude-haiku-4-5-20251001"
CHECK = ('import pathlib\nprint("a", pathlib.Path("a.txt").read_text().strip(), '
         '"b", pathlib.Path("b.txt").read_text().strip())\n'
         'pathlib.Path("ran.log").open("a").write("ran\\n")\n')


def installed(program: Path) -> str:
    if not program.exists():
        pytest.skip(f"{program.name} is not installed (scripts/test installs it into "
                    ".ci/harnesses)")
    return str(program)


@pytest.fixture
def agent() -> str:
    return installed(AGENT)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "check.py").write_text(CHECK)
    (root / "keep").mkdir()
    (root / "keep" / "file").write_text("mine\n")
    return root


def write(ws: Path, name: str, text: str) -> ToolUse:
    return ToolUse("mcp__acp__Write", {"file_path": f"{ws}/{name}", "content": text})


def bash(command: str) -> ToolUse:
    return ToolUse("mcp__acp__Bash", {"command": command, "description": "run it",
                                      "timeout": 60000})


def server_for(script: list[Reply]) -> FakeModelServer:
    """The model: the script, and Claude Code's own haiku request (its one-token "count"
    check, before the prompt) answered aside."""
    return FakeModelServer(script, models={HAIKU: [Reply("ok")]})


def normalize(port: int, ws: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    env.update(NORMALIZE_HOME=str(home), TERM="dumb", CI="true",
               ANTHROPIC_API_KEY="sk-ant-test-key", OPENAI_API_KEY="sk-test-key")
    env.pop("ANTHROPIC_BASE_URL", None)
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.Popen([sys.executable, str(LAUNCHER), f"{HOST}=127.0.0.1:{port}", "--",
                             *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cli(ws: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NORMALIZE_HOME": str(home), "TERM": "dumb"}
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=ws, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          check=False)


def port_of(server: FakeModelServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def finished(task_id: str) -> list[tuple[str, str]]:
    return [(e["command"].split("\n")[0], e["status"]) for e in TaskStore().events(task_id)
            if e["type"] == "action_finished"]


def events_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_each_write_and_command_of_claude_code_acp_is_a_normalize_action(
        agent: str, ws: Path, normalize_home: Path) -> None:
    outside = ws.parent / "outside.txt"
    script = [
        Reply("Writing a.", tools=(write(ws, "a.txt", "A\n"),)),
        Reply("Writing b.", tools=(write(ws, "b.txt", "B\n"),)),
        Reply("Checking.", tools=(bash("python3 check.py"),)),
        Reply("Cleaning.", tools=(bash("rm -r keep"),)),
        Reply("Outside.", tools=(bash(f"python3 -c \"open('{outside}', 'w').write('x')\""),)),
        Reply("Wrote a and b; the check ran."),
    ]
    with server_for(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}",
                         "write a and b, then run the check")
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:] + err[-3000:]
        server.assert_done()
    assert {r.headers["host"].split(":")[0] for r in server.requests} == {HOST}
    assert {r.headers.get("x-api-key") for r in server.requests} == {"sk-ant-test-key"}
    events = events_of(out)
    task_id = events[0]["task_id"]
    calls = finished(task_id)
    assert calls == [("write a.txt <<EOF", "success"), ("write b.txt <<EOF", "success"),
                     ("run python3 check.py", "success"), ("run rm -r keep", "blocked"),
                     (f"run python3 -c \"open('{outside}', 'w').write('x')\"", "error")]
    assert (ws / "a.txt").read_text() == "A\n" and (ws / "b.txt").read_text() == "B\n"
    assert (ws / "ran.log").read_text() == "ran\n"
    assert (ws / "keep" / "file").exists()  # refused by normalize's policy: never run
    assert not outside.exists()  # refused by the sandbox
    # what the agent did inside itself is its own tool calls, beside the actions
    called = [e["tool"] for e in events if e["type"] == "harness_tool_called"]
    assert [t.split()[0] for t in called] == ["Write", "Write", "Terminal", "Terminal",
                                               "Terminal"], called
    shown = cli(ws, normalize_home, "tasks", "show", task_id)
    assert "write a.txt" in shown.stdout and "run python3 check.py" in shown.stdout

    steps = [e for e in TaskStore().events(task_id)
             if e["type"] == "checkpoint_taken" and e["kind"] == "action"]
    assert [sorted(e["changes"]) for e in steps[:3]] == [["a.txt"], ["b.txt"], ["ran.log"]]
    back = cli(ws, normalize_home, "undo", task_id, "--to", str(steps[0]["step"]))
    assert back.returncode == 0, back.stderr
    assert (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    assert not (ws / "ran.log").exists()


def test_a_kill_of_normalize_mid_turn_then_resume_finishes_the_task(
        agent: str, ws: Path, normalize_home: Path) -> None:
    (ws / "slow.py").write_text('import time\nopen("slow.log", "a").write("slow\\n")\n'
                                'time.sleep(60)\n')
    script = [
        Reply("Writing a.", tools=(write(ws, "a.txt", "A\n"),)),
        Reply("Slow one.", tools=(bash("python3 slow.py"),)),
    ]
    with server_for(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}", "write a, run slow")
        deadline = time.monotonic() + 180
        while not (ws / "slow.log").exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.1)
        assert proc.stdout is not None
        task_id = json.loads(proc.stdout.readline())["task_id"]
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        # the resumed agent is told its turn was cut short; the slow run is not run again
        server.add(Reply("Writing b.", tools=(write(ws, "b.txt", "B\n"),)),
                   Reply("Picked up after the interruption; a and b are written."))
        server.add(Reply("ok"), model=HAIKU)  # the new agent process's own check
        resumed = normalize(port, ws, normalize_home, "resume", task_id, "--json")
        out, err = resumed.communicate(timeout=240)
        assert resumed.returncode == 0, err[-3000:]
        server.assert_done()
    events = events_of(out)
    assert any(e["type"] == "action_interrupted" for e in events)
    assert TaskStore().load(task_id).status.value == "done"
    assert (ws / "a.txt").read_text() == "A\n" and (ws / "b.txt").read_text() == "B\n"
    assert (ws / "slow.log").read_text() == "slow\n"  # once: cut short, never run again
    assert [p for p in running_in(ws) if "slow.py" in p or "claude" in p] == []
    # its own session loaded again (no new one), told the turn was cut short
    assert not [e for e in events if e["type"] == "harness_session"]
    told = server.requests[-2]
    assert "Your previous turn on this task was interrupted" in told.last_message
    assert "a.txt has been updated" in json.dumps(told.body)  # the session's history


def test_claude_agent_acp_keeps_its_writes_and_commands_inside_itself(
        ws: Path, normalize_home: Path) -> None:
    agent = installed(NEWER)
    outside = ws.parent / "outside.txt"
    script = [
        Reply("Writing a.", tools=(ToolUse("Write", {"file_path": f"{ws}/a.txt",
                                                     "content": "A\n"}),)),
        Reply("Checking.", tools=(ToolUse("Bash", {"command": "touch ran.log",
                                                   "description": "run it"}),)),
        Reply("Outside.", tools=(ToolUse("Bash", {
            "command": f"echo x > {outside}", "description": "write outside"}),)),
        Reply("Wrote a; the check ran."),
    ]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}", "write a, check")
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:] + err[-3000:]
        server.assert_done()
    assert {r.headers.get("x-api-key") for r in server.requests} == {"sk-ant-test-key"}
    events = events_of(out)
    task_id = events[0]["task_id"]
    assert finished(task_id) == []  # nothing asked of the client: no normalize action
    calls = {e["call_id"]: e["tool"] for e in events if e["type"] == "harness_tool_called"}
    ended = {e["call_id"]: e["ok"] for e in events if e["type"] == "harness_tool_finished"}
    assert [(tool, ended[call]) for call, tool in calls.items()] == [
        ("Write", True), ("Terminal", True), ("Terminal", False)]
    assert (ws / "a.txt").read_text() == "A\n" and (ws / "ran.log").exists()
    assert not outside.exists()  # its own shell is in normalize's sandbox
    # the tokens its prompt's answer names count in the task (no price: no cost)
    ended = events[-1]
    assert ended["type"] == "run_ended" and ended["output_tokens"] > 0
    usage = TaskStore().load(task_id).usage
    assert usage.cache_write_tokens > 0 and usage.cache_read_tokens > 0


def test_codex_acp_runs_its_commands_inside_itself(ws: Path, normalize_home: Path) -> None:
    agent = installed(CODEX)
    outside = ws.parent / "outside.txt"
    script = [Reply("", tools=(ToolUse("exec_command", {"cmd": "touch ran.log"}),)),
              Reply("", tools=(ToolUse("exec_command", {"cmd": f"echo x > {outside}"}),)),
              Reply("Ran it.")]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}/v1", "touch ran.log")
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:] + err[-3000:]
        server.assert_done()
    assert all(r.api == "responses" for r in server.requests)
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer sk-test-key"}
    assert {r.headers["host"].split(":")[0] for r in server.requests} == {HOST}
    events = events_of(out)
    assert finished(events[0]["task_id"]) == []  # its commands never reach the client
    called = [e["input"]["command"][-1] for e in events if e["type"] == "harness_tool_called"]
    assert called == ["touch ran.log", f"echo x > {outside}"]
    assert (ws / "ran.log").exists() and not outside.exists()  # in normalize's sandbox
    assert events[-1]["type"] == "run_ended" and events[-1]["summary"] == "Ran it."
