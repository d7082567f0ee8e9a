"""`resume --base-url`: a task goes on against another model server, as `agent --base-url`."""

from __future__ import annotations

import re
from pathlib import Path

from agent_helpers import KEYS, cli

from normalize.testing.servers import FakeModelServer


def test_resume_takes_the_model_server_from_base_url(repo: Path, normalize_home: Path) -> None:
    with FakeModelServer() as first, FakeModelServer() as second:
        first.add("Looking.\nview calc.py")
        started = cli("agent", "look at calc.py", "--max-turns", "1", "--base-url", first.url,
                      "-q", cwd=repo, home=normalize_home, env=KEYS,
                      drop=("ANTHROPIC_BASE_URL",))
        assert started.returncode == 3, started.stdout + started.stderr  # the turn limit
        found = re.search(r"normalize resume ([0-9a-f]{8})", started.stderr)
        assert found is not None, started.stderr
        second.add("done looked at it")
        resumed = cli("resume", found.group(1), "--base-url", second.url, "--max-turns", "3",
                      "-q", cwd=repo, home=normalize_home, env=KEYS,
                      drop=("ANTHROPIC_BASE_URL",))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(first.requests) == 1 and len(second.requests) == 1
        second.assert_done()
        assert first.errors == [] and second.errors == []


def test_base_url_goes_with_the_llm_driver_only(repo: Path, normalize_home: Path) -> None:
    done = cli("resume", "last", "--driver", "user", "--base-url", "http://127.0.0.1:9",
               cwd=repo, home=normalize_home, env=KEYS)
    assert done.returncode == 2
    assert "--base-url goes with --driver llm" in done.stderr
