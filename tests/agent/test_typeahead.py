"""Lines typed at the terminal while the model works: a real pty, the real CLI, the fake server."""

from __future__ import annotations

import os
import pty
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_helpers import KEYS, VENV_BIN, Terminal

from normalize.cli.typeahead import TypeAhead
from normalize.drivers.llm import LineQueue
from normalize.testing.servers import FakeModelServer, Reply

WROTE = "The user wrote while you worked: "


@pytest.fixture
def terminal(repo: Path, normalize_home: Path, server: FakeModelServer) -> Iterator[
        Callable[[list[str]], Terminal]]:
    opened: list[Terminal] = []
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}
    env.update({**KEYS, "NORMALIZE_HOME": str(normalize_home), "TERM": "xterm-256color",
                "ANTHROPIC_BASE_URL": server.url, "PYTHONUNBUFFERED": "1",
                "PATH": VENV_BIN + os.pathsep + env.get("PATH", "")})

    def open_terminal(args: list[str]) -> Terminal:
        opened.append(Terminal(args, cwd=repo, env=env))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


def test_a_line_typed_at_the_live_view_reaches_the_next_request(
        terminal: Callable[[list[str]], Terminal], server: FakeModelServer) -> None:
    typed = threading.Event()
    server.add(Reply("Looking.\nview calc.py", wait_for=typed), "done looked")
    term = terminal(["agent", "look at calc.py"])
    term.wait_for("type a line and press Enter")
    _requests_reach(server, 1)  # the first turn has begun: what is typed now waits for the next
    term.type("also chekc\x7f\x7fck\x1b[D the tests")  # Backspace edits; an arrow key is ignored
    term.wait_for("also check the tests")  # drawn in the footer while typed, not echoed
    term.type("\r")
    term.wait_for("1 line for the next turn")
    typed.set()
    term.wait_for("follow-up (an empty line")
    term.type("\r")
    assert term.finish() == 0
    server.assert_done()
    first, second = (r.last_message for r in server.requests)
    assert WROTE not in first
    assert f"{WROTE}also check the tests" in second
    assert b"sent to the model: also check the tests" in term.seen
    attrs = termios.tcgetattr(term.follower)  # the terminal is given back as it was
    assert attrs[3] & termios.ECHO and attrs[3] & termios.ICANON


def test_a_prompt_takes_the_terminal_from_the_type_ahead(
        terminal: Callable[[list[str]], Terminal], server: FakeModelServer) -> None:
    server.add("I need to know.\nask Which file should I read?", "done read it")
    term = terminal(["agent", "read the file I name"])
    term.wait_for("Which file should I read?")
    term.type("calc.py\r")  # the answer goes to the question, not to the queue
    term.wait_for("follow-up (an empty line")
    term.type("\r")
    assert term.finish() == 0
    server.assert_done()
    second = server.requests[1].last_message
    assert "calc.py" in second and WROTE not in second
    assert b"sent to the model" not in term.seen


def test_a_line_typed_after_the_last_turn_becomes_the_follow_up(
        terminal: Callable[[list[str]], Terminal], server: FakeModelServer) -> None:
    typed = threading.Event()
    server.add("Looking.\nview calc.py",  # the last turn ends with actions, then `done`
               Reply("One more look.\nview calc.py:1-2\ndone looked", wait_for=typed),
               "done renamed")
    term = terminal(["agent", "look at calc.py"])
    _requests_reach(server, 2)  # the last turn's request is in flight
    term.type("now rename mean to average\r")
    term.wait_for("1 line for the next turn")
    typed.set()  # the model's last reply: the line reached no turn of this run
    term.wait_for("continuing with what you typed: now rename mean to average")
    term.wait_for("follow-up (an empty line")
    term.type("\x04")  # Ctrl-D leaves
    assert term.finish() == 0
    server.assert_done()
    assert "- (now) now rename mean to average" in server.requests[2].last_message
    assert b"sent to the model" not in term.seen  # it was not sent before, with no turn to come


def _requests_reach(server: FakeModelServer, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(server.requests) < count:
        assert time.monotonic() < deadline, f"the server saw {len(server.requests)} requests"
        time.sleep(0.02)


# -- the reader itself, on a real pty -----------------------------------------------------


def test_editing_keys_and_a_character_split_across_reads() -> None:
    queue = LineQueue()
    shown: list[tuple[str, int]] = []
    ahead = TypeAhead(-1, queue, edit=True, show=lambda line, n: shown.append((line, n)))
    ahead.feed(b"caf" + "é".encode()[:1])
    ahead.feed("é".encode()[1:] + b" au lait\x17")  # Ctrl-W takes the last word
    assert ahead.line == "café au "
    ahead.feed(b"noir\x1bOP\r")  # F1 (ESC O P) is ignored; Enter queues the line
    ahead.feed(b"draft\x15\r   \r")  # Ctrl-U clears it; blank lines are not queued
    assert queue.drain() == ["café au noir"]
    assert shown[-1] == ("", 1) and ("café au ", 0) in shown


def test_the_terminal_is_restored_while_paused_and_after() -> None:
    leader, follower = pty.openpty()
    try:
        before = termios.tcgetattr(follower)
        queue = LineQueue()
        ahead = TypeAhead(follower, queue, edit=True)
        ahead.start()
        assert not termios.tcgetattr(follower)[3] & termios.ECHO
        os.write(leader, b"first line\r")
        deadline = time.monotonic() + 10
        while not len(queue) and time.monotonic() < deadline:
            time.sleep(0.01)
        with ahead.paused():
            assert termios.tcgetattr(follower)[3] == before[3]  # a prompt gets it as it was
            os.write(leader, b"for the prompt\n")
            assert os.read(follower, 100) == b"for the prompt\n"  # nobody else read it
        assert not termios.tcgetattr(follower)[3] & termios.ECHO
        ahead.stop()
        assert termios.tcgetattr(follower) == before
        assert queue.drain() == ["first line"]
    finally:
        os.close(leader)
        os.close(follower)
