"""Must-show 5: every bad input gets one clear result the model can act on (real servers)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import FIXTURE_SERVER

from normalize.execution.cache import NoCache
from normalize.intents import parse_command
from normalize.mcp.client import McpSessions
from normalize.mcp.config import parse_servers
from normalize.task import ActionResult
from normalize.tools import default_tools
from normalize.tools.approval import ApprovalMode, ApprovalPolicy
from normalize.tools.base import ToolContext
from normalize.tools.guard import WorkspaceGuard

FX = [sys.executable, str(FIXTURE_SERVER)]


def servers(**tables: dict[str, Any]) -> list[Any]:
    return parse_servers([{"name": name, **table} for name, table in tables.items()], "test")


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    opened: list[McpSessions] = []

    def run(text: str, *, configured: list[Any] | None = None, body: str | None = None,
            mode: ApprovalMode = ApprovalMode.YES) -> ActionResult:
        if configured is None:
            configured = servers(fx={"command": FX[0], "args": FX[1:], "timeout": 20})
        sessions = McpSessions(configured, workspace=tmp_path)
        opened.append(sessions)
        ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=NoCache(),
                          policy=ApprovalPolicy(mode=mode), mcp=sessions)
        action = parse_command(text if body is None else f"{text}\n{body}\nEOF")
        assert action.tool == "mcp"
        return default_tools().execute(action, ctx)

    yield run
    for sessions in opened:
        sessions.close()


def test_unknown_server_lists_the_configured_ones(run: Any) -> None:
    result = run("mcp nope echo text=hi")
    assert result.error == "unknown MCP server 'nope'; the servers are: fx"


def test_no_servers_configured_says_where_to_add_one(run: Any) -> None:
    result = run("mcp fx echo text=hi", configured=[])
    assert result.error is not None and result.error.startswith(
        "no MCP servers are configured; add an [[mcp]] table")


def test_unknown_tool_lists_the_servers_tools(run: Any) -> None:
    result = run("mcp fx nope")
    assert result.error == ("MCP server 'fx' has no tool 'nope'; its tools are: die, echo, pid, "
                            "slow, touch")


def test_a_tool_the_config_does_not_expose_is_unknown_and_says_why(run: Any) -> None:
    configured = servers(fx={"command": FX[0], "args": FX[1:], "tools": ["echo"]})
    result = run("mcp fx touch name=x", configured=configured)
    assert result.error == ("MCP server 'fx' has no tool 'touch' (the config does not expose "
                            "it); its tools are: echo")


def test_invalid_arguments_get_the_schemas_own_message_and_the_usage(run: Any) -> None:
    missing = run("mcp fx echo times=2")
    assert missing.error == ("invalid arguments for fx echo: 'text' is a required property; "
                             "usage: mcp fx echo text=STRING [times=INTEGER]")
    wrong = run("mcp fx echo text=hi times=many")
    assert wrong.error is not None
    assert "'many' is not of type 'integer' (at times)" in wrong.error
    bad_word = run("mcp fx echo hello")
    assert bad_word.error == ("`hello`: arguments are key=value (usage: mcp fx echo text=STRING "
                              "[times=INTEGER])")


def test_a_json_body_is_the_arguments_and_bad_json_says_so(run: Any) -> None:
    ok = run("mcp fx echo <<EOF", body='{"text": "hi", "times": 3}')
    assert ok.ok and ok.output == "hi hi hi"
    bad = run("mcp fx echo <<EOF", body='{"text": ')
    assert bad.error is not None and bad.error.startswith(
        "the body of `mcp fx echo` is not JSON:")


def test_a_server_that_fails_to_start_gives_its_command_and_stderr(run: Any) -> None:
    configured = servers(bad={"command": FX[0], "args": [*FX[1:], "--fail-start"]})
    result = run("mcp bad echo text=hi", configured=configured)
    assert result.error is not None
    assert result.error.startswith(
        f"MCP server 'bad' failed to start ({FX[0]} {FX[1]} --fail-start): it exited before "
        f"the MCP handshake (exit status 3); its stderr ends with:")
    assert result.error.endswith("fixture: cannot open the frobnicator database")


def test_a_program_that_does_not_exist_is_named(run: Any) -> None:
    configured = servers(gone={"command": "no-such-mcp-server-here"})
    result = run("mcp gone x", configured=configured)
    assert result.error is not None
    assert "MCP server 'gone' failed to start (no-such-mcp-server-here)" in result.error


def test_a_server_that_hangs_at_start_or_in_a_call_hits_the_timeout(run: Any) -> None:
    configured = servers(hang={"command": FX[0], "args": [*FX[1:], "--hang-start"],
                               "timeout": 2})
    result = run("mcp hang echo text=hi", configured=configured)
    assert result.error is not None
    assert "MCP server 'hang' failed to start" in result.error
    assert "it did not finish starting within 2 s (timeout)" in result.error
    configured = servers(fx={"command": FX[0], "args": FX[1:], "timeout": 15})
    # the start takes a second (several on a busy machine); the call then hangs past the 15 s
    result = run("mcp fx slow seconds=600", configured=configured)
    assert result.error == ("MCP server 'fx' did not answer slow within 15 s (timeout); it was "
                            "stopped and starts afresh on the next call")


def test_a_server_that_dies_mid_call_says_so_and_starts_afresh(run: Any) -> None:
    result = run("mcp fx die")
    assert result.error is not None
    assert result.error.startswith("MCP server 'fx' died during die (exit status 7); the "
                                   "call's outcome is unknown; it starts afresh on the next call")
    assert result.error.endswith("fixture: dying on purpose")


def test_a_tool_that_answers_with_an_error_is_an_error_result(run: Any) -> None:
    result = run("mcp fx touch name=/proc/nope/x")
    assert not result.ok
    assert result.error is not None and result.error.startswith("fx touch answered with an error")


def test_listing_servers_and_tools(run: Any) -> None:
    listed = run("mcp")
    assert listed.ok and "fx  (stdio:" in listed.output
    tools = run("mcp fx")
    assert tools.ok
    assert "mcp fx echo text=STRING [times=INTEGER]  (read-only)" in tools.output
    assert "mcp fx touch name=STRING  (changes things)" in tools.output


def test_cancelling_a_call_stops_it_and_says_cancelled(tmp_path: Path) -> None:
    import threading

    from normalize.cancel import CancelToken
    from normalize.task import ResultStatus

    configured = servers(fx={"command": FX[0], "args": FX[1:], "timeout": 60})
    cancel = CancelToken()
    with McpSessions(configured, workspace=tmp_path) as sessions:
        ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=NoCache(),
                          policy=ApprovalPolicy(mode=ApprovalMode.YES), mcp=sessions,
                          cancel=cancel)
        sessions.tools("fx")  # started
        timer = threading.Timer(1.0, cancel.cancel)
        timer.start()
        result = default_tools().execute(parse_command("mcp fx slow seconds=60"), ctx)
        timer.join()
    assert result.status is ResultStatus.CANCELLED
    assert result.error == "cancelled while the MCP call ran; its outcome is unknown"
    assert result.duration < 10


def test_the_approval_policy_reads_the_servers_read_only_hint(tmp_path: Path) -> None:
    configured = servers(fx={"command": FX[0], "args": FX[1:], "timeout": 20})
    asked: list[str] = []
    with McpSessions(configured, workspace=tmp_path) as sessions:
        def ctx(mode: ApprovalMode, answer: str | None) -> ToolContext:
            approver = None if answer is None else (lambda q: asked.append(q) or answer)
            return ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path),
                               cache=NoCache(), policy=ApprovalPolicy(mode=mode), mcp=sessions,
                               approver=approver)

        tools = default_tools()
        echo, touch = parse_command("mcp fx echo text=hi"), parse_command("mcp fx touch name=t")
        assert tools.execute(echo, ctx(ApprovalMode.AUTO, "no")).ok  # read-only: no question
        assert asked == []
        refused = tools.execute(touch, ctx(ApprovalMode.AUTO, "no"))
        assert refused.error == "not approved: `mcp fx touch name=t`"
        assert asked == ["Allow mcp `fx touch name=t`? (its MCP server does not mark it "
                         "read-only)"]
        assert tools.execute(touch, ctx(ApprovalMode.ASK, "yes")).ok
        assert (tmp_path / "t").read_text() == "touched\n"
        never = tools.execute(echo, ctx(ApprovalMode.NEVER, None))
        assert never.error is not None and "the approval mode is `never`" in never.error
        allowed = ApprovalPolicy(mode=ApprovalMode.NEVER, allow=["mcp fx *"])
        plain = ctx(ApprovalMode.NEVER, None)
        plain.policy = allowed
        assert tools.execute(touch, plain).ok  # an allow pattern names the server


def test_a_server_script_under_tmp_starts_though_programs_see_tmp_empty(
        run: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The sandbox empties /tmp for what it starts; the program and script the person
    configured stay visible (read-only), wherever they lie (here: outside the workspace)."""
    import shutil

    script = tmp_path_factory.mktemp("servers") / "fixture_server.py"
    shutil.copy(FIXTURE_SERVER, script)
    assert str(script).startswith("/tmp/")
    result = run("mcp fx echo text=hi", configured=servers(fx={"command": FX[0],
                                                               "args": [str(script)]}))
    assert result.ok, result.error
    assert "hi" in result.output
