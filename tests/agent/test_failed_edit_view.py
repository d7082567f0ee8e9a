"""A failed edit shows its useful part where the person looks: the closest lines and the advice."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agent_helpers import KEYS, VENV_BIN, Terminal, cli

from normalize.testing.servers import FakeModelServer

WRONG = '''Fixing the call.
edit calc.py <<EOF
<<<<<<< SEARCH
    return add(xs[0], "2") / len(xs)
=======
    return add(xs[0], 1) / len(xs)
>>>>>>> REPLACE
EOF'''
QUOTED = 'return add(xs[0], "1") / len(xs)'
ADVICE = "Copy the lines exactly into SEARCH"


def test_the_plain_view_shows_the_closest_lines_and_the_advice(
        repo: Path, normalize_home: Path, server: FakeModelServer) -> None:
    server.add(WRONG, "done gave up")
    run = cli("agent", "fix the call", cwd=repo, home=normalize_home,
              env={**KEYS, "ANTHROPIC_BASE_URL": server.url})
    assert run.returncode == 0, run.stderr
    shown = run.stdout
    assert "The closest lines (6-6" in shown and QUOTED in shown and ADVICE in shown


def test_the_live_view_shows_the_closest_lines_and_the_advice(
        repo: Path, normalize_home: Path, server: FakeModelServer) -> None:
    server.add(WRONG, "done gave up")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}
    env.update({**KEYS, "NORMALIZE_HOME": str(normalize_home), "TERM": "xterm-256color",
                "ANTHROPIC_BASE_URL": server.url, "PATH": VENV_BIN + os.pathsep + env["PATH"]})
    term = Terminal(["agent", "fix the call"], cwd=repo, env=env)
    try:
        term.wait_for("follow-up (an empty line")
        term.type("\r")
        assert term.finish() == 0
        screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.seen.decode(errors="replace"))
        assert QUOTED in screen and ADVICE in screen
    finally:
        term.close()
