"""Project instructions: AGENTS.md / CLAUDE.md in the stable prefix, cut with a notice, nested."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent_helpers import KEYS, Run, cli, scripted

from normalize.homes import config_home
from normalize.prompts.instructions import MAX_CHARS
from normalize.testing.servers import FakeModelServer


def test_agents_md_reaches_the_system_prompt_on_every_turn(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    (repo / "AGENTS.md").write_text("Always run the tests with `pytest -q`.\n")
    (repo / "CLAUDE.md").write_text("The CLAUDE file is not read when AGENTS.md exists.\n")
    model, factory = scripted("Looking.\nview calc.py", "done ok")
    run = run_agent(repo, factory=factory)
    assert run.outcome.status.value == "done"
    systems = [r.system for r in model.requests]
    assert systems[0] == systems[1]
    assert "## Project instructions" in systems[0]
    assert "Always run the tests with `pytest -q`." in systems[0]
    assert "CLAUDE file" not in systems[0]
    # instructions come before the workspace facts, after the command reference
    assert systems[0].index("## How to reply") < systems[0].index("Always run the tests")
    assert systems[0].index("Always run the tests") < systems[0].index("## Workspace")


def test_claude_md_when_there_is_no_agents_md_and_the_users_own_first(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    (repo / "CLAUDE.md").write_text("Use tabs in the Makefile.\n")
    config_home().mkdir(parents=True, exist_ok=True)
    (config_home() / "AGENTS.md").write_text("Answer in British English.\n")
    model, factory = scripted("done ok")
    run_agent(repo, factory=factory)
    system = model.requests[0].system
    assert "Use tabs in the Makefile." in system
    assert system.index("Answer in British English.") < system.index("Use tabs in the Makefile.")


def test_a_long_file_is_cut_with_a_notice(repo: Path, run_agent: Callable[..., Run]) -> None:
    lines = [f"- rule {n}: something the project wants done its own way" for n in range(400)]
    (repo / "AGENTS.md").write_text("\n".join(lines) + "\n")
    model, factory = scripted("done ok")
    run = run_agent(repo, factory=factory)
    system = model.requests[0].system
    assert "- rule 0:" in system and "- rule 399:" not in system
    assert "… (cut: AGENTS.md is " in system and "view AGENTS.md for the rest" in system
    assert len(system) < MAX_CHARS + 6_000
    notices = [n["message"] for n in run.of("notice") if n.get("level") == "warning"]
    assert any("AGENTS.md is" in n and "only the first" in n for n in notices)


def test_a_nested_agents_md_applies_once_the_task_works_below_it(
        repo: Path, run_agent: Callable[..., Run]) -> None:
    (repo / "pkg" / "core").mkdir(parents=True)
    (repo / "pkg" / "AGENTS.md").write_text("Code in pkg/ keeps Python 3.9 syntax.\n")
    (repo / "pkg" / "core" / "mod.py").write_text("X = 1\n")
    model, factory = scripted("Top level.\nview calc.py", "Below.\nview pkg/core/mod.py",
                              "Again.\nview pkg/core/mod.py", "done ok")
    run = run_agent(repo, factory=factory)
    assert run.outcome.status.value == "done"
    prompts = [r.messages[-1]["content"] for r in model.requests]
    rule = "Code in pkg/ keeps Python 3.9 syntax."
    assert all(rule not in r.system for r in model.requests)  # the prefix never changes
    assert rule not in prompts[1]  # calc.py is not below pkg/
    assert rule in prompts[2] and "Instructions for pkg/ (from pkg/AGENTS.md)" in prompts[2]
    assert rule not in prompts[3]  # given once


def test_no_project_instructions_on_the_command_line(
        repo: Path, normalize_home: Path, server: FakeModelServer) -> None:
    (repo / "AGENTS.md").write_text("A rule from the project.\n")
    server.add("done ok", "done ok")
    env = {**KEYS, "ANTHROPIC_BASE_URL": server.url}
    for flags in ([], ["--no-project-instructions"]):
        done = cli("agent", "say done", "--json", *flags, cwd=repo, home=normalize_home, env=env)
        assert done.returncode == 0, done.stderr
    with_rules, without = (r.body["system"][0]["text"] for r in server.requests)
    assert "A rule from the project." in with_rules
    assert "A rule from the project." not in without and "## Project instructions" not in without
