"""A loaded skill's `allowed-tools` pre-approve what they name in `ask` mode, and nothing more.

Each story is the real CLI in CI (`CI=true`, no terminal: no one to ask), the model
a scripted server that misbehaves as a model would: it loads the skill, then runs the
commands the grant covers, and the ones it does not (a destructive command, one a deny
pattern names, another program), in a workspace and with skills trusted or not.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import Project

from normalize.skills.grants import Grant, parse_allowed_tools
from normalize.testing.servers import FakeModelServer

GIT_FLOW = ("---\nname: git-flow\ndescription: Inspect the repository's history with git.\n"
            "allowed-tools: Bash(git:*) Read Bash WebFetch\n---\nRun `git log` first.\n")
CI = {"CI": "true"}
ASK = ("--approve", "ask")  # the person is asked about every side effect (auto: the default)
WAITS = 4  # the exit status of a task waiting for an answer (an approval here)


@pytest.fixture
def project(tmp_path: Path, server: FakeModelServer) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("hello\n")
    skill = tmp_path / "home" / "config" / "skills" / "git-flow"  # the user's own skill
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(GIT_FLOW)
    return Project(root, tmp_path / "home", server)


def finished(project: Project, task_id: str) -> dict[str, dict[str, Any]]:
    """Each command's `action_finished` event, by its command text."""
    return {e["command"]: e for e in project.journal(task_id) if e["type"] == "action_finished"}


def waited(project: Project, task_id: str, command: str) -> bool:
    """Whether `command` was held for a person's approval (and so did not run)."""
    event = finished(project, task_id).get(command) or {}
    return event.get("status") == "blocked" and \
        str(event.get("error")).startswith("waiting for approval")


def notices(project: Project, task_id: str) -> list[str]:
    return [e["message"] for e in project.journal(task_id) if e["type"] == "notice"]


def test_a_loaded_skill_pre_approves_the_commands_it_names(project: Project) -> None:
    done, task_id = project.agent("look at the history", "skill git-flow\nrun git status",
                                  "done looked", flags=ASK, env=CI)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = finished(project, task_id)["run git status"]
    assert ran["status"] == "success" and ran["exit_code"] == 0
    said = notices(project, task_id)
    assert any("skill git-flow pre-approves run `git …` while it is loaded" in n for n in said)
    assert any("`Bash` names no program" in n for n in said)  # a blanket grant: refused, said
    assert any("`WebFetch` is not a tool normalize pre-approves" in n for n in said)


def test_without_the_skill_the_same_command_waits_for_a_person(project: Project) -> None:
    done, task_id = project.agent("look at the history", "run git status", flags=ASK,
                                  env=CI)
    assert done.returncode == WAITS, done.stdout + done.stderr
    assert waited(project, task_id, "run git status")


@pytest.mark.parametrize("command", ["git reset --hard", "git clean -fdx", "rm notes.txt",
                                     "git status; rm notes.txt"])
def test_what_the_grant_does_not_cover_still_waits(project: Project, command: str) -> None:
    """A destructive git command, another program, and a covered part beside an uncovered
    one: each is the person's to approve, skill or not."""
    done, task_id = project.agent("clean up", "skill git-flow", f"run {command}", flags=ASK,
                                  env=CI)
    assert done.returncode == WAITS, done.stdout + done.stderr
    assert waited(project, task_id, f"run {command}")
    assert (project.root / "notes.txt").exists()


def test_a_deny_pattern_outranks_the_skill(project: Project) -> None:
    flow = project.root.parent / "agent.toml"
    flow.write_text('[workflow]\nname = "agent"\n[workflow.llm]\nmodel = "claude-sonnet-4-5"\n'
                    '[workflow.permissions]\ndeny = ["git push*"]\n')
    done, task_id = project.agent("publish", "$git-flow\nskill git-flow\nrun git push",
                                  "done could not", flags=("--workflow", str(flow), *ASK), env=CI)
    assert done.returncode == 0, done.stdout + done.stderr
    refused = finished(project, task_id)["run git push"]
    assert refused["status"] == "blocked"
    assert "matches the deny pattern 'git push*'" in refused["error"]


def test_approve_never_is_not_widened(project: Project) -> None:
    done, task_id = project.agent("look", "skill git-flow\nrun git status", "done no",
                                  flags=("--approve", "never"), env=CI)
    assert done.returncode == 0, done.stdout + done.stderr
    refused = finished(project, task_id)["run git status"]
    assert refused["status"] == "blocked" and "the approval mode is `never`" in refused["error"]


def test_an_untrusted_project_skill_grants_nothing(project: Project) -> None:
    """The same skill in the workspace, not trusted: not loaded, and `git status` waits."""
    user_skill = project.home / "config" / "skills" / "git-flow"
    (user_skill / "SKILL.md").unlink()
    user_skill.rmdir()
    planted = project.root / ".agents" / "skills" / "git-flow"
    planted.mkdir(parents=True)
    (planted / "SKILL.md").write_text(GIT_FLOW)
    done, task_id = project.agent("use $git-flow", "skill git-flow\nrun git status",
                                  flags=ASK, env=CI)
    assert done.returncode == WAITS, done.stdout + done.stderr
    assert "ignored 1 project skill(s) (git-flow): untrusted workspace files" in done.stdout
    assert waited(project, task_id, "run git status")
    assert not any("pre-approves" in n for n in notices(project, task_id))


def test_an_untrusted_workflow_preloads_the_skill_without_its_grants(project: Project) -> None:
    """A workspace workflow nobody trusted may load your skill, never widen with it."""
    flows = project.root / ".normalize" / "workflows"  # found by name: the workspace's
    flows.mkdir(parents=True)
    (flows / "grab.toml").write_text('[workflow]\nname = "grab"\nskills = ["git-flow"]\n'
                                     '[workflow.llm]\nmodel = "claude-sonnet-4-5"\n')
    done, task_id = project.agent("look", "run git status",
                                  flags=("--workflow", "grab", *ASK), env=CI)
    assert "skill git-flow loaded (the workflow's skills)" in done.stdout
    assert "pre-approves" not in done.stdout
    assert done.returncode == WAITS, done.stdout + done.stderr
    assert waited(project, task_id, "run git status")


def test_the_field_maps_to_verbs() -> None:
    grants, problems = parse_allowed_tools(
        "s", "Bash(git diff:*) Bash(npm run test) Bash(make *) Read Grep Edit(docs/*) Write "
             "Bash(*) Bash(:*) mcp__x__y")
    assert [str(g) for g in grants] == ["run `git diff …`", "run `npm run test`",
                                        "run `make *`", "edit docs/*", "every write"]
    assert len(problems) == 3
    diff, exact, make, edit, write = grants
    assert diff.covers("run", ["git", "diff", "HEAD"])
    assert not diff.covers("run", ["git", "push"]) and not diff.covers("run", ["gitx", "diff"])
    assert exact.covers("run", ["npm", "run", "test"])
    assert not exact.covers("run", ["npm", "run", "test", "--", "x"])
    assert make.covers("run", ["make", "check"]) and not make.covers("edit", ["edit", "x"])
    assert edit.covers("edit", ["edit", "docs/a.md"]) and not edit.covers("edit", ["edit", "a"])
    assert write.covers("write", ["write", "any"]) and not write.covers("run", ["write"])
    assert parse_allowed_tools("s", ["Bash(git:*)", "Read"])[0] == [
        Grant("s", "run", words=("git",), written="Bash(git:*)")]
    assert json.dumps(problems)  # plain strings: said as notices
