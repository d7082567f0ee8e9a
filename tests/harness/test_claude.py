"""Claude Code as a driver: the real CLI, pinned, against the local Anthropic server.

The server plays a scripted conversation in which Claude Code reads a file,
edits it and runs a check through its own tools (Read, Edit, Bash); normalize
runs it in the sandbox and journals each step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_support import HarnessSite, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


@pytest.fixture
def site(tmp_path: Path) -> HarnessSite:
    return make_site(tmp_path, "claude")


def fixing(ws: Path) -> list[Reply]:
    """Claude Code's model: read calc.py, fix it, run the check, say so."""
    return [
        Reply("Reading it.", tools=(ToolUse("Read", {"file_path": f"{ws}/calc.py"}),)),
        Reply("Fixing.", tools=(ToolUse("Edit", {"file_path": f"{ws}/calc.py",
                                                  "old_string": "a - b",
                                                  "new_string": "a + b"}),)),
        Reply("Checking.", tools=(ToolUse("Bash", {"command": "python3 check.py",
                                                   "description": "run the check"}),)),
        Reply("Fixed add; the check passes."),
    ]


def test_claude_fixes_a_file_and_diff_and_undo_cover_its_shell_changes(
        site: HarnessSite) -> None:
    with FakeModelServer(fixing(site.ws)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "claude", "--json",
                                "--base-url", site.base_url(port), "fix add in calc.py")
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    called = of_type(events, "harness_tool_called")
    assert [e["tool"] for e in called] == ["Read", "Edit", "Bash"]
    finished = {e["call_id"]: e for e in of_type(events, "harness_tool_finished")}
    assert "check passed" in finished[called[2]["call_id"]]["output"]
    assert all(finished[e["call_id"]]["ok"] for e in called)
    replied = of_type(events, "model_replied")[-1]
    assert replied["cost_usd"] > 0 and replied["cache_write_tokens"] > 0
    assert of_type(events, "run_ended")[-1]["cost_usd"] == pytest.approx(replied["cost_usd"],
                                                                        abs=1e-5)
    assert {r.headers["host"].split(":")[0] for r in server.requests} == {"api.harness.test"}
    assert (site.ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    task = events[0]["task_id"]
    diff = site.cli("diff", task)
    assert "-    return a - b" in diff.stdout and "+    return a + b" in diff.stdout
    assert "report.txt" in diff.stdout, diff.stdout  # what its Bash command made
    undone = site.cli("undo", task)
    assert undone.returncode == 0, undone.stderr
    assert (site.ws / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert not (site.ws / "report.txt").exists()


def test_with_the_sandbox_off_claude_still_gets_its_key(site: HarnessSite) -> None:
    with FakeModelServer([Reply("Nothing to do.")]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "claude", "--json", "--sandbox",
                                "off", "--approve", "yes", "--base-url", server.url, "look")
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    assert server.requests[0].headers["x-api-key"] == "sk-ant-test-key"
    assert of_type(events, "run_ended")[-1]["summary"] == "Nothing to do."
