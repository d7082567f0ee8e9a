"""Must-show 6: `normalize mcp` serves one workspace's tasks, trusts no path, approves no
person's call.

The official SDK's client drives the server over stdio, as another agent would;
the tasks it must not reach are made by the real CLI in another workspace under
the same NORMALIZE_HOME.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_helpers import CI_ENV, PY, cli, json_lines

ECHO = '[workflow]\nname = "echo"\n[[workflow.steps]]\nname = "e"\naction = "run echo hi"\n'
NOTE = '[workflow]\nname = "look"\n[[workflow.steps]]\nname = "n"\naction = "note looked"\n'
Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _params(workspace: Path, home: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=PY, args=["-m", "normalize.cli.app", "mcp", "-w",
                                                   str(workspace), *flags],
                                 env={"NORMALIZE_HOME": str(home), **CI_ENV})


def _session(params: StdioServerParameters, body: Callable[[Call], Awaitable[Any]]) -> Any:
    """Open one client session, hand `body` a `call(tool, args)`, return what it returns."""
    async def go() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await body(s.call_tool)

    return anyio.run(go)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _run(workspace: Path, home: Path, *args: str) -> str:
    """`normalize run ARGS --json` in `workspace`; the new task's id."""
    proc = cli("run", *args, "--json", cwd=workspace, home=home)
    started = [e for e in json_lines(proc.stdout) if e["type"] == "run_started"]
    assert started, proc.stderr
    return str(started[0]["task_id"])


def _status(workspace: Path, home: Path, task: str) -> dict[str, Any]:
    proc = cli("tasks", "show", task, "--json", cwd=workspace, home=home)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout)["task"])


async def _until_settled(call: Call, task: str) -> dict[str, Any]:
    """Poll `show_task` in the session until the task has ended (done, failed, stopped)."""
    deadline = time.monotonic() + 60
    while True:
        shown = json.loads(_text(await call("show_task", {"task": task})))
        if shown["status"] in ("done", "failed", "interrupted") or time.monotonic() > deadline:
            return dict(shown)
        await anyio.sleep(0.1)


def test_the_server_for_a_cannot_list_read_answer_or_start_b_s_tasks(
        tmp_path: Path, normalize_home: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        (root / "wf.toml").write_text(ECHO)
        (root / "look.toml").write_text(NOTE)
    mine = _run(a, normalize_home, "look.toml")
    theirs = _run(b, normalize_home, "wf.toml", "--approve", "ask")  # waits for an approval
    assert _status(b, normalize_home, theirs)["status"] == "waiting"

    async def body(call: Call) -> dict[str, Any]:
        out: dict[str, Any] = {"list": await call("list_tasks", {})}
        for ref, name in ((theirs, "id"), (theirs[:4], "prefix")):
            out[f"show {name}"] = await call("show_task", {"task": ref})
            out[f"events {name}"] = await call("task_events", {"task": ref})
            out[f"answer {name}"] = await call("answer_task", {"task": ref, "answer": "yes"})
        out["last"] = await call("show_task", {"task": "last"})
        out["start by path"] = await call("start_workflow", {"workflow": str(b / "look.toml")})
        out["start by .."] = await call("start_workflow", {"workflow": "../b/look.toml"})
        return out

    got = _session(_params(a, normalize_home, "--allow-run"), body)
    listed = [json.loads(line)["id"] for line in _text(got["list"]).splitlines()]
    assert listed == [mine]
    assert json.loads(_text(got["last"]))["id"] == mine
    for name in ("id", "prefix"):
        for what in ("show", "events", "answer"):
            result = got[f"{what} {name}"]
            assert result.is_error, (what, name, _text(result))
            assert f"in this workspace ({a})" in _text(result)
            assert "echo hi" not in _text(result)
    for how in ("start by path", "start by .."):
        assert got[how].is_error and "outside the workspace" in _text(got[how])
    shown = _status(b, normalize_home, theirs)
    assert shown["status"] == "waiting"  # B's approval was not given
    tasks = {p.stem for p in (normalize_home / "tasks").glob("*.json")}
    assert tasks == {mine, theirs}  # nothing was started from B's files


def _evil(root: Path, outside: Path) -> None:
    """`ci/evil.toml`: it asks for `mode = "yes"`, `sandbox = "off"` and touches `outside`."""
    (root / "ci").mkdir(parents=True)
    (root / "ci" / "evil.toml").write_text(
        '[workflow]\nname = "evil"\n[workflow.permissions]\nmode = "yes"\nsandbox = "off"\n'
        f'[[workflow.steps]]\nname = "t"\naction = "run touch {outside}"\n')


async def _start_and_settle(call: Call) -> tuple[Any, dict[str, Any], str]:
    started = await call("start_workflow", {"workflow": "ci/evil.toml"})
    task = json.loads(_text(started))["task"]
    settled = await _until_settled(call, task)
    return started, settled, _text(await call("task_events", {"task": task}))


def test_start_workflow_by_path_does_not_raise_the_file_s_permissions(
        tmp_path: Path, normalize_home: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "OUTSIDE"
    _evil(root, outside)
    started, settled, events = _session(_params(root, normalize_home, "--allow-run"),
                                        _start_and_settle)
    assert not started.is_error, _text(started)
    assert settled["status"] == "failed", settled
    assert not outside.exists()  # the sandbox held: the file's `sandbox = "off"` was ignored
    warnings = [json.loads(line)["message"] for line in events.splitlines()
                if json.loads(line)["type"] == "notice"]
    assert any('ignored mode = "yes" from ci/evil.toml' in w for w in warnings), warnings
    assert any('ignored sandbox = "off" from ci/evil.toml' in w for w in warnings), warnings


def test_a_file_the_person_trusted_keeps_its_permissions_when_started_by_path(
        tmp_path: Path, normalize_home: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "OUTSIDE"
    _evil(root, outside)
    trusted = cli("trust", "ci/evil.toml", cwd=root, home=normalize_home)
    assert trusted.returncode == 0, trusted.stderr
    _, settled, _ = _session(_params(root, normalize_home, "--allow-run"), _start_and_settle)
    assert settled["status"] == "done", settled
    assert outside.exists()  # `normalize trust` is the person's word for this exact content


def test_an_answer_over_mcp_never_approves_a_network_action_unless_the_server_says_so(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "wf.toml").write_text(ECHO)
    network = _run(root, normalize_home, "wf.toml", "--approve", "ask", "--network")
    plain = _run(root, normalize_home, "wf.toml", "--approve", "ask")

    async def answer(call: Call) -> tuple[Any, Any, dict[str, Any]]:
        refused = await call("answer_task", {"task": network, "answer": "yes"})
        allowed = await call("answer_task", {"task": plain, "answer": "yes"})
        return refused, allowed, await _until_settled(call, plain)

    refused, allowed, settled = _session(_params(root, normalize_home, "--allow-run"), answer)
    assert refused.is_error
    assert _text(refused) == "Error executing tool answer_task: " + (
        f"task {network} waits for an approval only the person can give (it runs with "
        f"network access); an answer over MCP may not approve it. Answer it at a terminal "
        f"with `normalize resume {network} --answer yes`, or serve with --allow-approve-all "
        f"to let MCP clients approve such actions")
    assert _status(root, normalize_home, network)["status"] == "waiting"
    assert not allowed.is_error and settled["status"] == "done"  # a confined run: any answerer

    async def approve_all(call: Call) -> dict[str, Any]:
        result = await call("answer_task", {"task": network, "answer": "yes"})
        assert not result.is_error, _text(result)
        return await _until_settled(call, network)

    flags = ("--allow-run", "--allow-approve-all")
    assert _session(_params(root, normalize_home, *flags), approve_all)["status"] == "done"


def test_allow_approve_all_needs_allow_run(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("mcp", "--allow-approve-all", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "normalize: error: --allow-approve-all needs --allow-run (answer_task is served only "
        "with it)"]
