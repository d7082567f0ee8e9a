"""The `acp` driver with real ACP agents: Zed's `claude-code-acp` and its successor
`claude-agent-acp` (npm, pinned in scripts/test) against normalize's local Anthropic server,
with scripted replies.

The agent's model asks for its ACP tools (`mcp__acp__Write`, `mcp__acp__Bash`), which the
agent serves through the client's `fs/write_text_file` and `terminal/create`: normalize
runs each as an action of its own. The agent gets its key, its home and its model server the
way the claude harness does (normalize/tools/harness/agents.py); the model host's name is
pinned to the local server for normalize's proxy (tests/sandbox/pinned_normalize.py).

Gemini CLI (`gemini --acp`, npm `@google/gemini-cli`) runs against the local Gemini API
(`normalize.testing.gemini`): its file writes come back to normalize; its shell runs inside it.
`claude-agent-acp` asks the client for none of it: its Write and Bash run inside the agent
(in normalize's sandbox); so does Zed's `codex-acp` (on Codex, against the local Responses
API) with its `apply_patch` edits and its commands. normalize sees those as the agent's tool
calls, and records each one that may change files as a step of its own (a `record` action
when the call ends). The agent goes on while normalize records, so each reply after such a
call waits until the step before it is taken (`Steps`): the test then knows which call's
change each step holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
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
GEMINI = BIN / "gemini"
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


def normalize(port: int, ws: Path, home: Path, *args: str,
              **more: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    env.update(more)
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


class Steps:
    """Reads normalize's `--json` events as they come (`watch`); `taken(n)` is set once n
    action steps were taken (a reply that waits for it is answered only then)."""

    def __init__(self, count: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.marks = [threading.Event() for _ in range(count + 1)]
        self.thread: threading.Thread | None = None

    def taken(self, count: int) -> threading.Event:
        return self.marks[count]

    def watch(self, proc: subprocess.Popen[str]) -> tuple[list[dict[str, Any]], str]:
        """Read `proc`'s events to its end; (its events, its stderr)."""
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait(240)
        self.thread.join(30)
        proc.stderr.close()
        if proc.stdout is not None:
            proc.stdout.close()
        return self.events, err

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        steps = 0
        for line in proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                self.events.append(event)
                if event["type"] == "checkpoint_taken" and event["kind"] == "action":
                    steps += 1
                    for mark in self.marks[:steps + 1]:
                        mark.set()


def action_steps(task_id: str) -> list[dict[str, Any]]:
    return [e for e in TaskStore().events(task_id)
            if e["type"] == "checkpoint_taken" and e["kind"] == "action"]


def test_each_write_and_command_of_claude_code_acp_is_a_normalize_action(
        agent: str, ws: Path, normalize_home: Path) -> None:
    outside = ws.parent / "outside.txt"
    script = [
        Reply("Writing a.", tools=(write(ws, "a.txt", "A\n"),)),
        Reply("Writing b.", tools=(write(ws, "b.txt", "B\n"),)),
        Reply("Checking.", tools=(bash("python3 check.py"),)),
        Reply("Outside.", tools=(bash(f"python3 -c \"open('{outside}', 'w').write('x')\""),)),
        Reply("Cleaning.", tools=(bash("rm -r keep"),)),  # rejected: the agent ends its turn
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
    # it asks permission first (judged by normalize's policy), then the client to do it
    escape = f"python3 -c \"open('{outside}', 'w').write('x')\""
    assert calls == [("permit edit a.txt", "success"), ("write a.txt <<EOF", "success"),
                     ("permit edit b.txt", "success"), ("write b.txt <<EOF", "success"),
                     ("permit run python3 check.py", "success"),
                     ("run python3 check.py", "success"),
                     (f"permit run {escape}", "success"), (f"run {escape}", "error"),
                     ("permit run rm -r keep", "blocked")]
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
    steps = Steps(3)
    script = [
        Reply("Writing a.", tools=(ToolUse("Write", {"file_path": f"{ws}/a.txt",
                                                     "content": "A\n"}),)),
        Reply("Checking.", tools=(ToolUse("Bash", {"command": "touch ran.log",
                                                   "description": "run it"}),),
              wait_for=steps.taken(1)),
        Reply("Outside.", tools=(ToolUse("Bash", {
            "command": f"echo x > {outside}", "description": "write outside"}),),
              wait_for=steps.taken(2)),
        Reply("Wrote a; the check ran.", wait_for=steps.taken(3)),
    ]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}", "write a, check")
        events, err = steps.watch(proc)
        assert proc.returncode == 0, err[-3000:]
        server.assert_done()
    assert {r.headers.get("x-api-key") for r in server.requests} == {"sk-ant-test-key"}
    task_id = events[0]["task_id"]
    calls = {e["call_id"]: e["tool"] for e in events if e["type"] == "harness_tool_called"}
    ended = {e["call_id"]: e["ok"] for e in events if e["type"] == "harness_tool_finished"}
    assert [(tool, ended[call]) for call, tool in calls.items()] == [
        ("Write", True), ("Terminal", True), ("Terminal", False)]
    # nothing asked of the client but permission (judged by normalize's policy): each call
    # it ran itself is a step of its own
    asked = ["permit edit a.txt", "permit run touch ran.log", f"permit run echo x > {outside}"]
    assert finished(task_id) == [pair for (call, tool), permit in zip(calls.items(), asked,
                                                                      strict=True)
                                 for pair in ((permit, "success"),
                                              (f"record {call}: {tool}", "success"))]
    assert [sorted(e["changes"]) for e in action_steps(task_id)] == [["a.txt"], ["ran.log"], []]
    assert (ws / "a.txt").read_text() == "A\n" and (ws / "ran.log").exists()
    assert not outside.exists()  # its own shell is in normalize's sandbox
    # the tokens its prompt's answer names count in the task (no price: no cost)
    last = events[-1]
    assert last["type"] == "run_ended" and last["output_tokens"] > 0
    usage = TaskStore().load(task_id).usage
    assert usage.cache_write_tokens > 0 and usage.cache_read_tokens > 0


def patch(*hunks: str) -> ToolUse:
    """Codex's `apply_patch` (a freeform tool: its input is the patch's text)."""
    return ToolUse("apply_patch", "*** Begin Patch\n" + "".join(hunks) + "*** End Patch\n")


def test_codex_acp_edits_and_commands_are_each_a_step_of_their_own(
        ws: Path, normalize_home: Path) -> None:
    """codex-acp applies its patches and runs its commands itself (it never calls the client's
    fs or terminal): each is recorded as a step when its call ends, so `diff STEP` and
    `undo --to STEP` address one edit and leave the others; its commands run in the sandbox."""
    agent = installed(CODEX)
    outside = ws.parent / "outside.txt"
    steps = Steps(5)
    script = [
        Reply("", tools=(patch("*** Add File: a.txt\n+A\n"),)),
        Reply("", tools=(patch("*** Add File: b.txt\n+B\n"),), wait_for=steps.taken(1)),
        Reply("", tools=(patch("*** Update File: keep/file\n@@\n-mine\n+ours\n"),),
              wait_for=steps.taken(2)),
        Reply("", tools=(ToolUse("exec_command", {"cmd": "python3 check.py"}),),
              wait_for=steps.taken(3)),
        Reply("", tools=(ToolUse("exec_command", {"cmd": f"echo x > {outside}"}),),
              wait_for=steps.taken(4)),
        Reply("Wrote a and b, changed keep/file, ran the check.", wait_for=steps.taken(5))]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}/v1", "write a and b")
        events, err = steps.watch(proc)
        assert proc.returncode == 0, err[-3000:]
        server.assert_done()
    assert all(r.api == "responses" for r in server.requests)
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer sk-test-key"}
    assert {r.headers["host"].split(":")[0] for r in server.requests} == {HOST}
    task_id = events[0]["task_id"]
    # it asks permission for each (normalize's policy allows: auto, confined), then acts
    calls = [c for c, _ in finished(task_id)]
    assert calls[::2] == ["permit edit a.txt", "permit edit b.txt", "permit edit keep/file",
                          "permit run python3 check.py", f"permit run echo x > {outside}"]
    assert [c.split(": ", 1)[1] for c in calls[1::2]] == [
        "Edit a.txt", "Edit b.txt", "Edit keep/file", "python3 check.py", f"echo x > {outside}"]
    assert [sorted(e["changes"]) for e in action_steps(task_id)] == [
        ["a.txt"], ["b.txt"], ["keep/file"], ["ran.log"], []]
    assert (ws / "ran.log").read_text() == "ran\n" and (ws / "keep" / "file").read_text() == \
        "ours\n"
    assert not outside.exists()  # its own shell is in normalize's sandbox
    assert events[-1]["type"] == "run_ended" and events[-1]["summary"].startswith("Wrote a")

    shown = cli(ws, normalize_home, "tasks", "show", task_id)
    assert "Edit keep/file" in shown.stdout and "python3 check.py" in shown.stdout
    step = {sorted(e["changes"])[0]: e["step"] for e in action_steps(task_id) if e["changes"]}
    diff = cli(ws, normalize_home, "diff", task_id, str(step["keep/file"]))
    assert "-mine" in diff.stdout and "+ours" in diff.stdout and "a.txt" not in diff.stdout
    back = cli(ws, normalize_home, "undo", task_id, "--to", str(step["a.txt"]))
    assert back.returncode == 0, back.stderr
    assert (ws / "a.txt").read_text() == "A\n" and not (ws / "b.txt").exists()
    assert (ws / "keep" / "file").read_text() == "mine\n" and not (ws / "ran.log").exists()


def test_codex_acp_asks_first_and_a_command_normalize_denies_never_runs(
        ws: Path, normalize_home: Path) -> None:
    """codex-acp is set to ask before it acts (`approval_policy = "untrusted"`): a command
    under a deny pattern is rejected by normalize's policy (even with `--approve yes`), and
    Codex never runs it."""
    agent = installed(CODEX)
    config = normalize_home.parent / "config"
    config.mkdir()
    (config / "config.toml").write_text('[permissions]\ndeny = ["rm *"]\n')
    # rejected, codex-acp ends its turn (the model is asked nothing more)
    script = [Reply("", tools=(ToolUse("exec_command", {"cmd": "rm -rf keep"}),))]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness", f"acp:{agent}",
                         "--json", "--base-url", f"http://{HOST}:{port}/v1", "--approve",
                         "yes", "clean up", NORMALIZE_CONFIG=str(config))
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        server.assert_done()
    task_id = events_of(out)[0]["task_id"]
    refused = [e for e in TaskStore().events(task_id) if e["type"] == "action_finished"
               and e["command"] == "permit run rm -rf keep"]
    assert [e["status"] for e in refused] == ["blocked"]
    assert "deny pattern 'rm *'" in refused[0]["error"]
    assert (ws / "keep" / "file").read_text() == "mine\n"  # never run
    assert [c for c, _ in finished(task_id)] == ["permit run rm -rf keep"]  # no record


def test_gemini_cli_writes_through_normalize_against_a_local_gemini_api(
        ws: Path, normalize_home: Path) -> None:
    """Gemini CLI in ACP mode (`gemini --acp`), pointed at the local Gemini API server
    (`GOOGLE_GEMINI_BASE_URL`, set by normalize from `--base-url`): its file writes come back
    to normalize as the client's `fs/write_text_file` (each a `write` action, checked first
    with a `view` that finds no file); its shell runs inside it, recorded as a step."""
    agent = installed(GEMINI)
    steps = Steps(3)
    script = [
        Reply("Writing a.", tools=(ToolUse("write_file", {"file_path": f"{ws}/a.txt",
                                                          "content": "A\n"}),)),
        Reply("Writing b.", tools=(ToolUse("write_file", {"file_path": f"{ws}/b.txt",
                                                          "content": "B\n"}),),
              wait_for=steps.taken(1)),
        Reply("Checking.", tools=(ToolUse("run_shell_command", {
            "command": "python3 check.py", "description": "run the check"}),),
              wait_for=steps.taken(2)),
        Reply("Wrote a and b; the check ran.", wait_for=steps.taken(3)),
    ]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness",
                         f"acp:{agent} --acp --model gemini-2.5-pro", "--json",
                         "--base-url", f"http://{HOST}:{port}", "write a and b, run the check")
        events, err = steps.watch(proc)
        assert proc.returncode == 0, err[-3000:]
        server.assert_done()
    assert {r.api for r in server.requests} == {"gemini"}
    assert {r.headers["host"].split(":")[0] for r in server.requests} == {HOST}
    assert {r.model for r in server.requests} == {"gemini-2.5-pro"}
    task_id = events[0]["task_id"]
    calls = finished(task_id)
    # before each write it reads the file (not there yet: an empty file) and asks permission
    # (judged by normalize's policy), then writes it; its shell command is judged so too
    assert [c for c in calls if not c[0].startswith("view")] == [
        ("permit edit a.txt", "success"), ("write a.txt <<EOF", "success"),
        ("permit edit b.txt", "success"), ("write b.txt <<EOF", "success"),
        ("permit run python3 check.py", "success"), (calls[-1][0], "success")]
    assert calls[-1][0].startswith("record run_shell_command") and \
        calls[-1][0].endswith(": python3 check.py")
    assert {c for c in calls if c[0].startswith("view")} == {("view a.txt", "error"),
                                                            ("view b.txt", "error")}
    assert [sorted(e["changes"]) for e in action_steps(task_id)] == [["a.txt"], ["b.txt"],
                                                                     ["ran.log"]]
    ended = [e for e in events if e["type"] == "harness_tool_finished"]
    assert ended[-1]["ok"] and ended[-1]["output"] == "a A b B"  # its own shell, sandboxed
    assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "done"
    back = cli(ws, normalize_home, "undo", task_id, "--to",
               str(action_steps(task_id)[0]["step"]))
    assert back.returncode == 0, back.stderr
    assert (ws / "a.txt").read_text() == "A\n" and not (ws / "b.txt").exists()
    assert not (ws / "ran.log").exists()


def test_gemini_cli_asks_for_its_shell_and_normalize_refuses_a_destructive_command(
        ws: Path, normalize_home: Path) -> None:
    """Gemini CLI runs its shell inside itself, asking `session/request_permission` first:
    normalize's policy answers, so `rm -rf keep` in a non-interactive run is rejected (a
    person would have to approve it) and never runs, while a confined command is allowed."""
    agent = installed(GEMINI)
    script = [
        Reply("Cleaning.", tools=(ToolUse("run_shell_command", {
            "command": "rm -rf keep", "description": "clean"}),)),
        Reply("Checking.", tools=(ToolUse("run_shell_command", {
            "command": "touch ran.log", "description": "mark"}),)),
        Reply("Could not clean; marked."),
    ]
    with FakeModelServer(script) as server:
        port = port_of(server)
        proc = normalize(port, ws, normalize_home, "agent", "--harness",
                         f"acp:{agent} --acp --model gemini-2.5-pro", "--json",
                         "--base-url", f"http://{HOST}:{port}", "clean up")
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    events = events_of(out)
    calls = finished(events[0]["task_id"])
    assert ("permit run rm -rf keep", "blocked") in calls
    assert (ws / "keep" / "file").read_text() == "mine\n"  # never run
    refused = next(e for e in TaskStore().events(events[0]["task_id"])
                   if e["type"] == "action_finished" and e["command"] == "permit run rm -rf keep")
    assert "deletes or discards work" in refused["error"]
    assert ("permit run touch ran.log", "success") in calls and (ws / "ran.log").exists()
