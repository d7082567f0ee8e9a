"""The person's hooks (`[[hooks]]`): they block, format, hear waits and endings, time out."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import KEYS, cli, json_lines

from normalize.testing.servers import FakeModelServer, Reply

RECORD = """import json, pathlib, sys
data = json.load(sys.stdin)
pathlib.Path({out!r}).write_text(json.dumps(data))
"""
BLOCK = RECORD + """sys.stderr.write("recursive deletes are not allowed here; move it to trash/")
sys.exit(2)
"""
FORMAT = RECORD + """path = pathlib.Path(data["cwd"]) / data["tool_input"]["args"][0]
path.write_text("".join(line.rstrip() + "\\n" for line in path.read_text().splitlines()))
"""
HANG = "import time\ntime.sleep(600)\n"


class Setup:
    """A config dir with hooks, a data home, and the agent run against a fake model server."""

    def __init__(self, root: Path, repo: Path, server: FakeModelServer) -> None:
        self.root, self.repo, self.server = root, repo, server
        self.config = root / "config"
        self.config.mkdir()
        self.tables: list[str] = []

    def hook(self, event: str, source: str, *, match: str | None = None,
             timeout: float = 30) -> Path:
        """A hook running a small Python script; returns where the script records its input."""
        number = len(self.tables)
        script, out = self.root / f"hook{number}.py", self.root / f"hook{number}.json"
        script.write_text(source.format(out=str(out)) if "{out" in source else source)
        match_line = f"match = {json.dumps(match)}\n" if match else ""
        self.tables.append(f'[[hooks]]\nevent = "{event}"\n{match_line}'
                           f"command = {json.dumps([sys.executable, str(script)])}\n"
                           f"timeout = {timeout}\n")
        (self.config / "config.toml").write_text("\n".join(self.tables))
        return out

    def agent(self, *replies: str | Reply, goal: str = "tidy up"
              ) -> tuple[int, list[dict[str, Any]]]:
        self.server.add(*replies)
        done = cli("agent", goal, "--json", "--approve", "yes", "--sandbox", "off",
                   "--model", "anthropic:claude-sonnet-4-5", cwd=self.repo,
                   home=self.root / "home", env={"ANTHROPIC_BASE_URL": self.server.url,
                                                 "NORMALIZE_CONFIG": str(self.config), **KEYS})
        return done.returncode, json_lines(done.stdout)


def _setup(tmp_path: Path, repo: Path, server: FakeModelServer) -> Setup:
    return Setup(tmp_path, repo, server)


def _ran(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "hook_ran"]


def test_before_action_hook_blocks_rm_r_and_the_model_hears_why(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("object")
    site = _setup(tmp_path, repo, server)
    seen = site.hook("before_action", BLOCK, match="*rm -r*")
    code, events = site.agent("run rm -r build", "done left build alone")

    assert code == 0, events
    assert (repo / "build" / "out.o").read_text() == "object"  # nothing deleted
    finished = [e for e in events if e["type"] == "action_finished"]
    assert finished[0]["status"] == "blocked"
    assert "recursive deletes are not allowed here" in server.requests[1].last_message
    data = json.loads(seen.read_text())
    assert data["hook_event_name"] == "before_action" and data["tool_name"] == "run"
    assert data["command"] == "run rm -r build" and data["cwd"] == str(repo)
    assert [(e["event"], e["outcome"]) for e in _ran(events)] == [("before_action", "blocked")]


def test_before_action_json_decision_blocks_and_a_non_match_runs(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    site.hook("before_action", 'print(\'{"decision": "block", "reason": "not on Fridays"}\')',
              match="write *")
    code, events = site.agent("write a.txt <<EOF\nx\nEOF", "view calc.py", "done")
    assert code == 0 and not (repo / "a.txt").exists()
    assert "not on Fridays" in server.requests[1].last_message
    assert [e["event"] for e in _ran(events)] == ["before_action"]  # view did not match


def test_after_action_hook_formats_an_edited_file(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    seen = site.hook("after_action", FORMAT, match="write *")
    code, events = site.agent("write notes.txt <<EOF\nhello   \nworld\t\nEOF", "done wrote")
    assert code == 0, events
    ran = [(e["outcome"], e["reason"]) for e in _ran(events)]
    assert (repo / "notes.txt").read_text() == "hello\nworld\n", ran
    data = json.loads(seen.read_text())
    assert data["tool_response"]["status"] == "success"
    assert _ran(events)[0]["outcome"] == "ok"


def test_waiting_and_run_end_hooks_hear_the_question_status_and_cost(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    waited = site.hook("waiting", RECORD)
    ended = site.hook("run_end", RECORD)
    code, events = site.agent(Reply("ask Which colour should the button be?",
                                    usage={"input_tokens": 1000}))
    assert code != 0 and events[-1]["status"] == "waiting"
    assert json.loads(waited.read_text())["question"] == "Which colour should the button be?"
    end = json.loads(ended.read_text())
    assert end["hook_event_name"] == "run_end" and end["status"] == "waiting"
    assert end["cost_usd"] == events[-1]["cost_usd"] > 0
    assert [e["event"] for e in _ran(events)] == ["waiting", "run_end"]
    assert events[-1]["type"] == "run_ended"  # the hook's record comes before the ending


def test_a_hanging_hook_is_killed_at_its_timeout_and_the_task_goes_on(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    site.hook("before_action", HANG, timeout=1)
    started = time.monotonic()
    code, events = site.agent("view calc.py", "done looked")
    assert code == 0 and events[-1]["summary"] == "looked"
    assert time.monotonic() - started < 60
    ran = _ran(events)
    assert ran[0]["outcome"] == "timed_out" and "killed after 1s" in ran[0]["reason"]
    assert 1 <= ran[0]["duration"] < 30
    assert next(e for e in events if e["type"] == "action_finished")["status"] == "success"


def test_an_untrusted_workspace_workflows_hooks_are_ignored_and_said(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    flows = repo / ".normalize" / "workflows"
    flows.mkdir(parents=True)
    script = tmp_path / "mark.py"
    script.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    table = (f'[[workflow.hooks]]\nevent = "run_end"\n'
             f"command = {json.dumps([sys.executable, str(script)])}\n")
    (flows / "mine.toml").write_text('[workflow]\nname = "mine"\n[workflow.llm]\n'
                                     'model = "anthropic:claude-sonnet-4-5"\n' + table)
    env = {"ANTHROPIC_BASE_URL": server.url, "NORMALIZE_CONFIG": str(tmp_path / "cfg"), **KEYS}
    server.add("done a", "done b")
    untrusted = cli("run", "mine", "--json", cwd=repo, home=tmp_path / "home", env=env)
    assert untrusted.returncode == 0, untrusted.stderr
    assert not marker.exists()
    notices = [e["message"] for e in json_lines(untrusted.stdout) if e["type"] == "notice"]
    assert any("ignored 1 hook(s)" in n and "normalize trust" in n for n in notices), notices
    # the same file named on the command line is the person's choice: its hooks run
    named = cli("run", str(flows / "mine.toml"), "--json", cwd=repo, home=tmp_path / "home",
                env=env)
    assert named.returncode == 0, named.stderr
    assert marker.read_text() == "ran"


def test_a_bad_hook_table_is_one_line_before_any_task(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    config = site.config / "config.toml"
    for table, expected in (('event = "after_everything"\ncommand = "true"', "event = "),
                            ('event = "run_end"\ncommand = []', "command must be"),
                            ('event = "run_end"\ncommand = "true"\ntimeout = 0', "timeout = 0"),
                            ('event = "run_end"\ncommand = "true"\nin_workspace = "yes"',
                             "in_workspace = 'yes': true or false")):
        config.write_text(f"[[hooks]]\n{table}\n")
        done = cli("agent", "x", "--model", "anthropic:claude-sonnet-4-5", cwd=repo,
                   home=tmp_path / "home", env={"NORMALIZE_CONFIG": str(site.config), **KEYS})
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"normalize: error: {config}: hooks[0]: {expected}")
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "home" / "tasks").exists() or \
        not any((tmp_path / "home" / "tasks").iterdir())


def test_a_hook_cannot_widen_what_the_approvals_refuse(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    site.hook("before_action", 'print(\'{"decision": "approve", "continue": true}\')')
    server.add("write a.txt <<EOF\nx\nEOF", "done tried")
    done = cli("agent", "write a file", "--json", "--approve", "never", "--sandbox", "off",
               "--model", "anthropic:claude-sonnet-4-5", cwd=repo, home=tmp_path / "home",
               env={"ANTHROPIC_BASE_URL": server.url, "NORMALIZE_CONFIG": str(site.config),
                    **KEYS})
    events = json_lines(done.stdout)
    assert not (repo / "a.txt").exists()
    assert next(e for e in events if e["type"] == "action_finished")["status"] == "blocked"
    assert [e["outcome"] for e in _ran(events)] == ["ok"]


COUNTER = """import json, pathlib, sys
data = json.load(sys.stdin)
count = pathlib.Path({out!r})
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
print(json.dumps({{"additional_context": f"build status note number {{n}}"}}))
"""


def test_before_request_hook_adds_context_to_that_request_only(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    site.hook("before_request", COUNTER)
    code, events = site.agent("view calc.py", "done looked")
    assert code == 0, events
    first, second = (json.dumps(r.body["messages"]) for r in server.requests)
    assert "build status note number 1" in first
    assert "build status note number 2" in second
    assert "build status note number 1" not in second  # transient: not kept in the history
    assert [e["event"] for e in _ran(events)] == ["before_request", "before_request"]


COMPACTING = """[workflow]
name = "compacting"
[workflow.vars]
goal = "{task}"
[workflow.llm]
model = "anthropic:claude-sonnet-4-5"
[workflow.context]
strategy = "conversation"
compact_after_chars = 2000
"""
VETO = RECORD + """sys.stderr.write("keep my context whole")
sys.exit(2)
"""


@pytest.mark.parametrize("vetoed", [True, False])
def test_a_before_compact_hook_can_veto_a_compaction(
        repo: Path, server: FakeModelServer, tmp_path: Path, vetoed: bool) -> None:
    for name in ("alpha", "beta", "gamma"):
        (repo / f"{name}.txt").write_text("".join(f"{name} line {n}\n" for n in range(200)))
    flow = tmp_path / "compacting.toml"
    flow.write_text(COMPACTING)
    site = _setup(tmp_path, repo, server)
    seen = site.hook("before_compact", VETO if vetoed else RECORD)
    server.add("view alpha.txt", "view beta.txt", "view gamma.txt", "done read them")
    done = cli("agent", "read the files", "--workflow", str(flow), "--json", "--approve", "yes",
               "--sandbox", "off", cwd=repo, home=tmp_path / "home",
               env={"ANTHROPIC_BASE_URL": server.url, "NORMALIZE_CONFIG": str(site.config),
                    **KEYS})
    events = json_lines(done.stdout)
    assert done.returncode == 0, done.stderr
    data = json.loads(seen.read_text())
    assert data["hook_event_name"] == "before_compact" and data["trigger"] == "auto"
    assert data["before_chars"] > data["compact_after_chars"] == 2000
    assert data["results_compacted"] >= 1 and data["after_chars"] < data["before_chars"]
    last = json.dumps(server.requests[3].body["messages"])
    compacted = [e for e in events if e["type"] == "context_compacted"]
    notices = [e["message"] for e in events if e["type"] == "notice"]
    if vetoed:
        assert [(e["event"], e["outcome"], e["reason"]) for e in _ran(events)] == [
            ("before_compact", "blocked", "keep my context whole")]
        assert not compacted and "alpha line 150" in last  # the first result, whole
        assert any("a before_compact hook said no: keep my context whole" in n
                   for n in notices), notices
    else:
        assert [(e["event"], e["outcome"]) for e in _ran(events)] == [("before_compact", "ok")]
        assert compacted and "alpha line 150" not in last


ENVIRONMENT = RECORD.replace("json.dumps(data)", "json.dumps(dict(__import__('os').environ))")
SPAWN_AND_HANG = """import pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path({out!r}).write_text(str(child.pid))
time.sleep(600)
"""


def test_a_hook_runs_with_a_scrubbed_environment(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    seen = site.hook("run_end", ENVIRONMENT)
    code, _events = site.agent("done nothing to do")
    assert code == 0
    environment = json.loads(seen.read_text())
    assert environment.get("PATH") and "ANTHROPIC_API_KEY" not in environment
    assert not any(value == KEYS["ANTHROPIC_API_KEY"] for value in environment.values())


def test_a_hanging_hook_is_killed_with_what_it_started(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    site = _setup(tmp_path, repo, server)
    started = site.hook("run_end", SPAWN_AND_HANG, timeout=2)
    code, events = site.agent("done nothing to do")
    assert code == 0 and _ran(events)[0]["outcome"] == "timed_out"
    pid = int(started.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    survived = _alive(pid)
    if survived:  # never leave it behind, whatever the verdict
        os.kill(pid, signal.SIGKILL)
    assert not survived, f"the hook's child {pid} outlived it"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for init counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
