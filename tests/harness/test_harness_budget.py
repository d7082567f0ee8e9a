"""`--budget` binds a harness: its turn is stopped when the cost reaches it (exit 3), and the
task resumes, with more budget, in the harness's own session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_support import HarnessSite, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse


@pytest.fixture
def site(tmp_path: Path) -> HarnessSite:
    return make_site(tmp_path, "claude")


def test_the_budget_stops_claude_with_exit_3_and_more_budget_resumes_it(
        site: HarnessSite) -> None:
    ws = site.ws
    read = ToolUse("Read", {"file_path": f"{ws}/calc.py"})
    script = [
        Reply("Reading.", tools=(read,)),  # the budget is spent here
        Reply("Reading again.", tools=(read,)),  # resumed: a new process reads before an edit
        Reply("Fixing.", tools=(ToolUse("Edit", {"file_path": f"{ws}/calc.py",
                                                  "old_string": "a - b",
                                                  "new_string": "a + b"}),)),
        Reply("Fixed."),
    ]
    with FakeModelServer(script) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "claude", "--json", "--budget",
                                "0.01", "--base-url", site.base_url(port), "fix add")
        assert proc.returncode == 3, proc.stderr
        ended = of_type(events, "run_ended")[-1]
        assert ended["status"] == "limit_reached" and "budget" in ended["summary"]
        assert ended["cost_usd"] >= 0.01  # its first request costs about $0.015
        assert (ws / "calc.py").read_text().endswith("a - b\n")  # stopped before the edit
        more, events = site.run(port, "resume", "last", "--json", "--budget", "5")
        assert more.returncode == 0, more.stderr
        server.assert_done()
    assert (ws / "calc.py").read_text().endswith("a + b\n")
    assert "Reading." in json.dumps(server.requests[-2].body["messages"])  # the same session
