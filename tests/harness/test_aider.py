"""aider as a driver: the real aider (pinned, in a virtualenv of its own) against the local
chat-completions server; its edit lands, its cost line counts, and the only host it reaches
is the model's (its price-list download from GitHub is refused by the proxy)."""

from __future__ import annotations

from pathlib import Path

from harness_support import make_site, of_type

from normalize.testing.servers import FakeModelServer

EDIT = ("I will fix it.\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n"
        "    return a + b\n>>>>>>> REPLACE\n```\n")


def test_aider_edits_under_normalize_and_reaches_only_the_model_host(tmp_path: Path) -> None:
    site = make_site(tmp_path, "aider")
    with FakeModelServer([EDIT]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        proc, events = site.run(port, "agent", "--harness", "aider", "--model", "openai:gpt-4.1",
                                "--json", "--base-url", site.base_url(port, "/v1"),
                                "fix add in calc.py")
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    assert (site.ws / "calc.py").read_text().endswith("a + b\n")
    ended = of_type(events, "run_ended")[-1]
    assert ended["summary"] == "Applied edit to calc.py"
    assert ended["cost_usd"] > 0 and ended["input_tokens"] > 0  # its own Tokens/Cost line
    network = of_type(events, "action_finished")[-1]["data"]["network"]
    allowed = {r["host"] for r in network if r["allowed"]}
    assert allowed == {"api.harness.test"}, network
    assert "+    return a + b" in site.cli("diff", str(events[0]["task_id"])).stdout
