"""Codex CLI as a driver: the real CLI, pinned, against the local Responses API server.

Codex runs its own shell tool (`exec_command`) with its sandbox off; normalize's contains it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness_support import HarnessSite, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


@pytest.fixture
def site(tmp_path: Path) -> HarnessSite:
    return make_site(tmp_path, "codex")


def shell(command: str) -> Reply:
    return Reply("", tools=(ToolUse("exec_command", {"cmd": command}),))


def fixing() -> list[Reply]:
    return [shell("cat calc.py"), shell("sed -i 's/a - b/a + b/' calc.py"),
            shell("python3 check.py"), Reply("Fixed add; the check passes.")]


def agent(site: HarnessSite, port: int, *flags: str
          ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    return site.run(port, "agent", "--harness", "codex", "--model", "openai:gpt-5", "--json",
                    "--base-url", site.base_url(port, "/v1"), *flags, "fix add in calc.py")


def test_codex_fixes_a_file_and_diff_and_undo_cover_its_commands(site: HarnessSite) -> None:
    with FakeModelServer(fixing()) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = agent(site, port)
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    called = of_type(events, "harness_tool_called")
    assert [c["input"]["command"].split("-lc ", 1)[1] for c in called] == [
        "'cat calc.py'", "\"sed -i 's/a - b/a + b/' calc.py\"", "'python3 check.py'"]
    finished = of_type(events, "harness_tool_finished")
    assert finished[-1]["output"] == "check passed\n" and all(f["ok"] for f in finished)
    replied = of_type(events, "model_replied")[-1]
    assert replied["model"] == "codex:gpt-5" and replied["cache_read_tokens"] > 0
    assert replied["cost_usd"] > 0  # priced by normalize: codex reports tokens only
    assert all(r.api == "responses" and r.model == "gpt-5" for r in server.requests)
    task = str(events[0]["task_id"])
    shown = site.cli("tasks", "show", task).stdout  # its own calls are steps a person reads
    ran = [line.strip() for line in shown.splitlines() if "· codex ran " in line]
    assert len(ran) == 3 and "cat calc.py" in ran[0] and "python3 check.py" in ran[2], shown
    report = site.ws / "report.html"
    assert site.cli("report", task, "-o", str(report)).returncode == 0
    page = report.read_text()
    report.unlink()  # (not a change of the task's)
    assert "3 tool calls by codex</summary>" in page and "check passed" in page
    diff = site.cli("diff", task).stdout
    assert "+    return a + b" in diff and "report.txt" in diff
    assert site.cli("undo", task).returncode == 0
    assert (site.ws / "calc.py").read_text().endswith("a - b\n")
    assert not (site.ws / "report.txt").exists()


def test_a_follow_up_continues_the_codex_session(site: HarnessSite) -> None:
    with FakeModelServer([*fixing(), Reply("Added a docstring.")]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = agent(site, port)
        assert proc.returncode == 0, proc.stderr
        session = of_type(events, "harness_session")[0]["session_id"]
        more, events = site.run(port, "resume", "last", "--json", "also add a docstring")
        assert more.returncode == 0, more.stderr
        server.assert_done()
    assert of_type(events, "harness_session")[0]["session_id"] == session  # exec resume
    carried = json.dumps(server.requests[-1].body["input"])
    assert "fix add in calc.py" in carried and "check passed" in carried
    assert "also add a docstring" in carried
    assert of_type(events, "run_ended")[-1]["summary"] == "Added a docstring."


def test_base_url_alone_points_codex_at_the_server(site: HarnessSite) -> None:
    """`--base-url` without `--model`: the flag wins over the agent workflow's own model table
    (an Anthropic one), so Codex reaches the local server, not the public API."""
    with FakeModelServer([Reply("Nothing to do.")]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "codex", "--json", "--base-url",
                                site.base_url(port, "/v1"), "say hello", timeout=120)
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    assert of_type(events, "run_ended")[-1]["summary"] == "Nothing to do."


def test_a_model_of_another_api_is_refused_in_one_line(site: HarnessSite) -> None:
    proc = site.cli("agent", "--harness", "codex", "-m", "anthropic:claude-sonnet-4-5",
                    "say hello")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        ("normalize: error: --model anthropic:claude-sonnet-4-5: codex speaks the openai API; "
         "give --model openai:MODEL")]


def test_a_silent_turn_says_so_within_30_seconds(site: HarnessSite) -> None:
    """The model server takes 25 s to answer: the plain view says Codex is waiting, and on
    which server, before the answer comes."""
    with FakeModelServer([Reply("Done at last.", delay=25)]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, _ = site.run(port, "agent", "--harness", "codex", "--base-url",
                           site.base_url(port, "/v1"), "say hello", timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert (f"codex has said nothing for 15 s; its model server: "
            f"{site.base_url(port, '/v1')}") in said, said
    assert said.index("has said nothing") < said.index("Done at last.")


def test_a_long_command_of_codex_is_said_as_its_own_not_as_a_silent_server(
        site: HarnessSite) -> None:
    sleeping = Reply("", tools=(ToolUse("exec_command", {"cmd": "sleep 18 && echo slept",
                                                         "yield_time_ms": 40000}),))
    with FakeModelServer([sleeping, Reply("Slept.")]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, _ = site.run(port, "agent", "--harness", "codex", "--base-url",
                           site.base_url(port, "/v1"), "sleep a while", timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "· codex's command_execution call has run for 15 s: " in said, said
    assert "sleep 18" in said
    assert "has said nothing" not in said
