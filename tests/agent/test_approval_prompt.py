"""The approval prompt on a real pty: the change is shown before the question, Ctrl-C stops."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_helpers import BROKEN, FIX, KEYS, VENV_BIN, Terminal

from normalize.testing.servers import FakeModelServer

OLD = '-    return add(xs[0], "1") / len(xs)'
NEW = "+    return add(xs[0], 1) / len(xs)"


@pytest.fixture
def terminal(repo: Path, normalize_home: Path, server: FakeModelServer) -> Iterator[
        Callable[..., Terminal]]:
    opened: list[Terminal] = []
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}
    env.update({**KEYS, "NORMALIZE_HOME": str(normalize_home), "TERM": "xterm-256color",
                "ANTHROPIC_BASE_URL": server.url, "PYTHONUNBUFFERED": "1",
                "PATH": VENV_BIN + os.pathsep + env.get("PATH", "")})

    def open_terminal(args: list[str], **extra: str) -> Terminal:
        opened.append(Terminal(args, cwd=repo, env={**env, **extra}))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


def _screen(term: Terminal) -> str:
    """What the terminal shows, colours left out."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.seen.decode(errors="replace"))


def test_the_diff_is_shown_before_the_question(
        terminal: Callable[..., Terminal], server: FakeModelServer, repo: Path) -> None:
    server.add(FIX, "done fixed the call")
    term = terminal(["agent", "fix the call", "--approve", "ask"])
    term.wait_for("Allow edit `calc.py`?")
    screen = _screen(term)
    asked = screen.index("Allow edit `calc.py`?")
    assert OLD in screen[:asked] and NEW in screen[:asked]  # the change, before the question
    assert (repo / "calc.py").read_text() == BROKEN  # nothing written before the yes
    term.type("y\r")
    term.wait_for("follow-up (an empty line")
    term.type("\r")
    assert term.finish() == 0
    assert "add(xs[0], 1)" in (repo / "calc.py").read_text()


def test_a_long_change_is_paged_and_view_shows_the_rest(
        terminal: Callable[..., Terminal], server: FakeModelServer, repo: Path) -> None:
    body = "".join(f"line {n}\n" for n in range(200))
    server.add(f"Writing.\nwrite big.txt <<EOF\n{body}EOF", "done wrote it")
    term = terminal(["agent", "write a big file", "--approve", "ask"], LINES="30")
    term.wait_for("more lines of the change")
    term.wait_for("[v]iew all:")
    assert "+line 10\r\n" in _screen(term) and "+line 199" not in _screen(term)
    term.type("v\r")
    term.wait_for("+line 199")
    term.type("n\r")
    term.wait_for("follow-up (an empty line")
    term.type("\r")
    assert term.finish() == 0
    assert not (repo / "big.txt").exists()


def test_ctrl_c_at_the_approval_prompt_stops_at_once(
        terminal: Callable[..., Terminal], server: FakeModelServer, repo: Path) -> None:
    server.add(FIX, "done fixed the call")
    term = terminal(["agent", "fix the call", "--approve", "ask"])
    term.wait_for("[a]lways (every edit in this run):")
    typed = time.monotonic()
    term.type("\x03")  # the terminal sends SIGINT to the foreground process group
    status = term.finish(timeout=20)
    assert status == 130, _screen(term)[-2000:]
    assert time.monotonic() - typed < 10  # not waiting for an answer or a second Ctrl-C
    assert "stopping" in _screen(term)
    assert (repo / "calc.py").read_text() == BROKEN
