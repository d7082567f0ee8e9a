"""The memory story through the real CLI: learn `make check` once, review it, use it next time.

A first task finds that plain `pytest` fails here and `make check` works; its
success proposes that to the inbox. Once accepted, a second task on the same
project gets exactly one guarded memory message in every request and runs
`make check` first, in fewer requests. A failed run proposes nothing;
`--no-memory` recalls nothing; the saved conversation never holds the memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_helpers import MAKEFILE, Project, memory_messages

from normalize.memory import GUARD
from normalize.testing.servers import FakeModelServer

FIRST = ("Running the tests.\nrun pytest",
         "pytest found nothing to run; the Makefile has a check target.\nrun make check",
         "done the tests pass with make check")
AGENTS = "Project rule from AGENTS.md: keep the changelog current."


@pytest.fixture
def project(tmp_path: Path, server: FakeModelServer) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "Makefile").write_text(MAKEFILE)
    (root / "AGENTS.md").write_text(AGENTS + "\n")
    return Project(root, tmp_path / "home", server)


def learn(project: Project) -> str:
    """The first task: a wrong try, then `make check`; the candidate it proposed (its id)."""
    done, task_id = project.agent("make the tests pass", *FIRST)
    assert done.returncode == 0, done.stderr
    assert "memory proposed to the inbox (observed, #1): Run the tests with `make check`" \
        in done.stdout
    assert "review with: normalize memory inbox" in done.stdout
    inbox = project.memory("inbox")
    assert [(e["text"], e["source"], e["task"]) for e in inbox] == [
        ("Run the tests with `make check` (`pytest` failed here)", "observed", task_id)]
    assert "`pytest` exited 5 at turn 1; `make check` succeeded at turn 2" in inbox[0]["why"]
    shown = project.run("tasks", "show", task_id)
    assert "memory proposed to the inbox (observed, #1)" in shown.stdout
    return str(inbox[0]["id"])


def test_a_lesson_learnt_reviewed_and_used(project: Project) -> None:
    entry = learn(project)
    first_requests = len(project.server.requests)
    assert first_requests == 3
    assert not any(memory_messages(r) for r in project.server.requests)  # nothing accepted yet
    assert not any("## Memory" in "".join(b["text"] for b in r.body["system"])
                   for r in project.server.requests)  # nor a word about memory: as without it

    # in the inbox nothing is recalled: a task now gets no memory
    done, _ = project.agent("run the tests", "done nothing to do")
    assert done.returncode == 0 and not memory_messages(project.server.requests[-1])

    accepted = project.run("memory", "accept", entry)
    assert accepted.returncode == 0 and f"accepted #{entry}" in accepted.stdout
    assert [e["state"] for e in project.memory("list")] == ["accepted"]

    before = len(project.server.requests)
    done, task_id = project.agent("run the tests", "run make check", "done 3 passed",
                                  flags=("--context", "conversation"))
    assert done.returncode == 0, done.stderr
    second = project.server.requests[before:]
    assert len(second) == 2 < first_requests  # it went straight to make check
    for request in second:
        assert memory_messages(request) == [
            f"{GUARD}\n- Run the tests with `make check` (`pytest` failed here)\n"]
        messages = request.body["messages"]
        assert messages[0]["content"].startswith(GUARD)  # right after the cached system prompt
        system = "".join(block["text"] for block in request.body["system"])
        assert AGENTS in system and "## Memory" in system  # AGENTS.md ranks above, and it says
        assert system.index(AGENTS) < system.index("## Memory")
    ran = [e["command"] for e in project.journal(task_id) if e["type"] == "action_finished"]
    assert ran == ["run make check"]

    # the conversation saved on disk (the task file, the journal) never holds the memory
    for saved in (project.home / "tasks").glob(f"{task_id}*"):
        if saved.is_file():
            assert GUARD not in saved.read_text(errors="replace"), saved.name

    # --no-memory: nothing recalled, and the prompt does not speak of memory
    before = len(project.server.requests)
    done, _ = project.agent("run the tests", "done skipped", flags=("--no-memory",))
    assert done.returncode == 0
    request = project.server.requests[before]
    assert not memory_messages(request)
    assert "## Memory" not in "".join(block["text"] for block in request.body["system"])


def test_a_failed_run_proposes_nothing(project: Project) -> None:
    done, task_id = project.agent(
        "make the tests pass", "run pytest", "run make check",
        "I think it is fine.", "Still thinking about it.")  # no command twice: failed
    assert done.returncode != 0
    assert "memory" not in done.stdout
    assert not [e for e in project.journal(task_id) if e["type"] == "memory_proposed"]
    assert not (project.home / "memory").exists()  # nothing written, nothing even created
    assert project.memory("list", "--all") == []


def test_unattended_runs_write_nothing_and_say_so(project: Project) -> None:
    project.server.add(*FIRST)
    done = project.run("agent", "make the tests pass", "--model", "anthropic:claude-sonnet-4-5",
                       env={"CI": "true"})
    assert done.returncode == 0, done.stderr
    assert "memory left out: 1 candidate(s) not written: in CI" in done.stdout
    assert project.memory("list", "--all") == []


def test_bad_ids_are_one_line_errors(project: Project) -> None:
    learn(project)
    for args, said in ((("show", "9"), "no memory entry #9"),
                       (("accept", "x1"), "'x1' is not a memory entry id"),
                       (("forget", "42"), "no memory entry #42"),
                       (("accept",), "which entries?")):
        done = project.run("memory", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and said in done.stderr, done.stderr


def test_edit_reject_and_forget(project: Project) -> None:
    entry = learn(project)
    edited = project.run("memory", "edit", entry, "Run the tests with `make check`, never pytest")
    assert edited.returncode == 0, edited.stderr
    assert project.memory("show", entry)["text"] == "Run the tests with `make check`, never pytest"
    assert project.run("memory", "reject", entry).returncode == 0
    assert project.memory("list") == [] and project.memory("inbox") == []
    # a rejected lesson is not proposed again
    project.agent("make the tests pass", *FIRST)
    assert [e["state"] for e in project.memory("list", "--all")] == ["rejected"]
    assert project.run("memory", "forget", entry).returncode == 0
    assert project.memory("list", "--all") == []


def test_the_store_is_owner_only(project: Project) -> None:
    learn(project)
    directory = project.home / "memory"
    assert directory.stat().st_mode & 0o777 == 0o700
    for path in directory.iterdir():
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_what_you_say_is_proposed_redacted_and_yours_follows_you(project: Project,
                                                                tmp_path: Path) -> None:
    token = "ghp_" + "a1B2" * 9
    done, _ = project.agent(f"Fix the deploy. We always deploy with the token {token}.",
                            "done fixed")
    assert done.returncode == 0, done.stderr
    (entry,) = project.memory("inbox")
    assert entry["source"] == "person" and token not in entry["text"]
    assert entry["text"] == "We always deploy with the token [REDACTED]."
    stored = (project.home / "memory" / "memory.db").read_bytes()
    assert token.encode() not in stored
    accepted = project.run("memory", "accept", str(entry["id"]), "--user")
    assert accepted.returncode == 0, accepted.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = project.run("memory", "list", "-w", str(elsewhere))
    assert f"#{entry['id']} [user]  We always deploy with the token [REDACTED]." in listed.stdout
