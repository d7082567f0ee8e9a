"""`persons_call`: which approvals only the person may give (an MCP client's answer may not)."""

from __future__ import annotations

import pytest

from normalize.sandbox import SandboxMode, SandboxPolicy, probe
from normalize.task import Action
from normalize.tools.approval import persons_call


def run(text: str) -> Action:
    return Action("run", {"args": text.split()}, text=f"run {text}")


PERSONS: list[tuple[Action, SandboxPolicy, str]] = [
    (run("echo hi"), SandboxPolicy(network=True), "it runs with network access"),
    (run("echo hi"), SandboxPolicy(SandboxMode.OFF), "it runs with --sandbox off"),
    (Action("test", {"args": ["tests/"]}), SandboxPolicy(network=True),
     "it runs with network access"),
    (run("rm -rf build"), SandboxPolicy(), "it deletes or discards work in the workspace"),
    (run("pytest && git reset --hard"), SandboxPolicy(),
     "it deletes or discards work in the workspace"),
    (run("sudo git clean -fdx"), SandboxPolicy(), "it deletes or discards work in the workspace"),
    (Action("mcp", {"args": ["git", "git_commit"]}), SandboxPolicy(),
     "it calls a tool of another MCP server"),
]


@pytest.mark.parametrize(("action", "sandbox", "why"), PERSONS,
                         ids=[f"{a.tool}:{' '.join(a.args)}:{s.mode.value}:{s.network}"
                              for a, s, _ in PERSONS])
def test_leaving_the_sandbox_destroying_work_and_other_servers_are_the_person_s(
        action: Action, sandbox: SandboxPolicy, why: str) -> None:
    if sandbox.mode is not SandboxMode.OFF and not probe().available and action.tool != "mcp":
        pytest.skip(f"no sandbox on this machine: every program is the person's "
                    f"({probe().reason})")
    assert persons_call(action, sandbox) == why


def test_a_confined_program_and_an_edit_are_anyone_s_to_approve() -> None:
    if not probe().available:
        pytest.skip(f"no sandbox on this machine ({probe().reason})")
    for action in (run("pytest -q"), run("rm -f build/x"),
                   Action("edit", {"args": ["a.py"], "body": "x"}),
                   Action("mcp", {"args": ["git"]})):  # listing a server's tools
        assert persons_call(action, SandboxPolicy()) is None, action.args
