"""An ACP agent that asks `session/request_permission` before acting on its own (as codex-acp
and Gemini CLI do) is answered by normalize's approval policy: the request becomes a `permit`
action judged like the command or edit it asks for, and a refusal is a reject the agent obeys
(tests/acp/peer_agent.py runs the command itself only on an allow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from normalize.store import TaskStore

PEER = Path(__file__).with_name("peer_agent.py")


def workspace(root: Path) -> Path:
    root.mkdir()
    (root / "build").mkdir()
    (root / "build" / "out.o").write_text("object\n")
    return root


def agent(repo: Path, home: Path, prompt: str, *flags: str,
          config: str | None = None) -> tuple[str, list[tuple[str, str, str]]]:
    """Run the peer on `prompt` (non-interactive: CI, no tty); what it said, and its
    `permit` actions: (command, status, error)."""
    env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    env.update(NORMALIZE_HOME=str(home), TERM="dumb", CI="true")
    if config is not None:
        where = home.parent / f"{home.name}-config"
        where.mkdir(exist_ok=True)
        (where / "config.toml").write_text(config)
        env["NORMALIZE_CONFIG"] = str(where)
    proc = subprocess.run(
        [sys.executable, "-m", "normalize.cli.app", "agent", "--harness",
         f"acp:{sys.executable} {PEER}", *flags, prompt, "--json"],
        cwd=repo, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    said = "".join(e["text"] for e in events if e["type"] == "model_replied")
    permits = [(e["command"], e["status"], e.get("error") or "")
               for e in TaskStore().events(events[0]["task_id"])
               if e["type"] == "action_finished" and e["command"].startswith("permit ")]
    return said, permits


def test_a_command_under_a_deny_pattern_is_rejected_and_never_run(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    said, permits = agent(repo, normalize_home, "permit rm -rf build", "--approve", "yes",
                          config='[permissions]\ndeny = ["rm *"]\n')
    assert "answer: no" in said
    assert (repo / "build" / "out.o").exists()
    [(command, status, error)] = permits
    assert (command, status) == ("permit run rm -rf build", "blocked")
    assert "deny pattern 'rm *'" in error


def test_an_allowed_command_is_allowed_once_and_runs(tmp_path: Path,
                                                     normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    said, permits = agent(repo, normalize_home, "permit touch made.txt", "--approve", "auto")
    assert "answer: yes" in said  # allow once, never the agent's own `always`
    assert (repo / "made.txt").exists()
    assert permits == [("permit run touch made.txt", "success",
                        "")]


def test_approve_never_rejects_commands_and_edits(tmp_path: Path,
                                                  normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    said, permits = agent(repo, normalize_home, "permit touch made.txt", "--approve", "never")
    assert "answer: no" in said and not (repo / "made.txt").exists()
    assert permits[0][1] == "blocked" and "approval mode is `never`" in permits[0][2]
    said, permits = agent(repo, normalize_home, "permit-edit notes.txt", "--approve", "never")
    assert "answer: no" in said and not (repo / "notes.txt").exists()
    assert permits == [("permit edit notes.txt", "blocked", permits[0][2])]


def test_a_destructive_command_in_non_interactive_auto_is_rejected(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    said, permits = agent(repo, normalize_home, "permit rm -rf build", "--approve", "auto")
    assert "answer: no" in said
    assert (repo / "build" / "out.o").exists()
    [(command, status, error)] = permits
    assert (command, status) == ("permit run rm -rf build", "blocked")
    assert "deletes or discards work" in error and "non-interactive" in error
    # `ask` with no one to ask: rejected as well (the agent's turn never waits on a person)
    said, permits = agent(repo, normalize_home, "permit touch made.txt", "--approve", "ask")
    assert "answer: no" in said and not (repo / "made.txt").exists()
    assert permits[0][1] == "blocked" and "no one can be asked" in permits[0][2]


def test_a_write_the_policy_allows_is_allowed(tmp_path: Path, normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    said, permits = agent(repo, normalize_home, "permit-edit notes.txt", "--approve", "auto")
    assert "answer: yes" in said and (repo / "notes.txt").read_text() == "permitted\n"
    assert permits == [("permit edit notes.txt", "success", "")]


def terminal(args: list[str], repo: Path, home: Path) -> Any:
    """`normalize ARGS` on a real pty (the agent tests' terminal): a person can be asked."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))
    try:
        from agent_helpers import Terminal
    finally:
        sys.path.pop(0)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI",
                                                            "NORMALIZE_CRASH_AT")}
    env.update(NORMALIZE_HOME=str(home), TERM="xterm-256color", PYTHONUNBUFFERED="1")
    return Terminal(args, cwd=repo, env=env)


def test_a_person_at_the_terminal_is_asked_and_their_answer_is_the_agents(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = workspace(tmp_path / "repo")
    harness = f"acp:{sys.executable} {PEER}"
    for answer, kept in (("n", True), ("y", False)):
        term = terminal(["agent", "--harness", harness, "--approve", "auto",
                         "permit rm -rf build"], repo, normalize_home)
        try:
            term.wait_for("Allow run `rm -rf build`?")
            assert (repo / "build" / "out.o").exists()  # nothing runs before the answer
            term.type(f"{answer}\r")
            term.wait_for("answer: " + ("no" if kept else "yes"))
            term.type("\r")
            assert term.finish() == 0
        finally:
            term.close()
        assert (repo / "build" / "out.o").exists() is kept
