"""`resume ID --driver claude` hands a task another driver started to a harness, which is told
what happened before it and continues in the same workspace, journal and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

from harness_support import make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


def test_a_task_the_model_started_is_handed_to_claude(tmp_path: Path) -> None:
    site = make_site(tmp_path, "claude")
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["run python3 check.py"]))
    first = site.cli("agent", "--model", f"scripted:{script}", "--max-turns", "1", "--json",
                     "--approve", "auto", "make check.py pass", timeout=120)
    assert first.returncode == 3, first.stderr  # max_turns, with the check still failing
    ws = site.ws
    replies = [Reply("Reading.", tools=(ToolUse("Read", {"file_path": f"{ws}/calc.py"}),)),
               Reply("Fixing.", tools=(ToolUse("Edit", {"file_path": f"{ws}/calc.py",
                                                         "old_string": "a - b",
                                                         "new_string": "a + b"}),)),
               Reply("Fixed the operator.")]
    with FakeModelServer(replies) as server:
        port = int(server.url.rsplit(":", 1)[1])
        handed, events = site.run(port, "resume", "last", "--driver", "claude", "--json",
                                  "--base-url", site.base_url(port))
        assert handed.returncode == 0, handed.stderr + handed.stdout[-3000:]
        server.assert_done()
    told = json.dumps(server.requests[0].body["messages"])
    assert "Another agent worked on this task" in told and "run python3 check.py" in told
    assert "make check.py pass" in told
    assert of_type(events, "run_started")[0]["driver"] == "claude"
    assert (ws / "calc.py").read_text().endswith("a + b\n")
    shown = site.cli("tasks", "show", "last").stdout
    assert shown.find("run python3 check.py") < shown.find("claude: Another agent"), shown


def test_a_task_claude_started_is_handed_back_to_the_model(tmp_path: Path) -> None:
    site = make_site(tmp_path, "claude")
    read = ToolUse("Read", {"file_path": f"{site.ws}/calc.py"})
    with FakeModelServer([Reply("Reading.", tools=(read,))]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        first, _ = site.run(port, "agent", "--harness", "claude", "--json", "--budget", "0.01",
                            "--base-url", site.base_url(port), "make check.py pass")
        assert first.returncode == 3, first.stderr  # the budget stopped claude mid-turn
        server.assert_done()
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["run sed -i 's/a - b/a + b/' calc.py",
                                  "run python3 check.py", "done fixed by the model"]))
    handed = site.cli("resume", "last", "--driver", "llm", "--model", f"scripted:{script}",
                      "--budget", "5", "--approve", "auto", "--json", timeout=120)
    assert handed.returncode == 0, handed.stderr
    events = [json.loads(line) for line in handed.stdout.splitlines() if line.startswith("{")]
    assert of_type(events, "run_started")[0]["driver"] == "llm"
    assert of_type(events, "run_ended")[-1]["summary"] == "fixed by the model"
    assert (site.ws / "report.txt").read_text() == "ok\n"
    shown = site.cli("tasks", "show", "last").stdout
    assert 0 <= shown.find("claude: make check.py pass") < shown.find("run python3 check.py"), shown
