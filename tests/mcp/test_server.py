"""Must-show 4: the official SDK's client drives `normalize mcp` over stdio."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_helpers import PY

CALC = "class Calc:\n    def add(self, a: int, b: int) -> int:\n        return a + b\n"


def _session(workspace: Path, home: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=PY, args=["-m", "normalize.cli.app", "mcp", "-w",
                                                   str(workspace), *flags],
                                 env={"NORMALIZE_HOME": str(home), "CI": "true"})


def _drive(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]
           ) -> tuple[dict[str, Any], list[Any]]:
    """List the tools, make the calls; (name -> tool, results)."""
    async def go() -> tuple[dict[str, Any], list[Any]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            results = []
            for name, args in calls:
                results.append(await s.call_tool(name, args))
                if name in ("start_workflow", "answer_task"):
                    await anyio.sleep(2)  # the run goes on in the background
            return tools, results

    return anyio.run(go)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_the_sdk_client_lists_and_calls_the_code_tools_and_is_kept_in_the_workspace(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (tmp_path / "secret.txt").write_text("outside\n")
    tools, results = _drive(_session(root, normalize_home), [
        ("view", {"target": "calc.py"}), ("skeleton", {"path": "calc.py"}),
        ("grep", {"pattern": "return"}), ("view", {"target": "../secret.txt"}),
        ("view", {"target": str(tmp_path / "secret.txt")})])
    assert set(tools) == {"view", "skeleton", "grep", "list_tasks", "show_task", "task_events"}
    assert all(t.annotations.read_only_hint for t in tools.values())  # no --allow-run
    view, skeleton, grep, outside, absolute = results
    assert not view.is_error and "return a + b" in _text(view) and "3" in _text(view)
    assert not skeleton.is_error and "class Calc" in _text(skeleton)
    assert "def add(self, a: int, b: int) -> int" in _text(skeleton)
    assert "calc.py:3:" in _text(grep)
    assert outside.is_error and "`..` leads outside the workspace" in _text(outside)
    assert absolute.is_error and "absolute paths are not allowed" in _text(absolute)
    assert "outside\n" not in _text(outside) + _text(absolute)


def test_allow_run_serves_the_task_tools_that_start_and_follow_a_workflow(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    (root / ".normalize" / "workflows").mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / ".normalize" / "workflows" / "look.toml").write_text(
        '[workflow]\nname = "look"\n[[workflow.steps]]\nname = "see"\naction = "view calc.py"\n')
    tools, results = _drive(_session(root, normalize_home, "--allow-run"), [
        ("start_workflow", {"workflow": "look", "goal": "look at calc"}),
        ("list_tasks", {})])
    assert tools["start_workflow"].annotations.read_only_hint is False
    assert tools["answer_task"].annotations.read_only_hint is False
    started = json.loads(_text(results[0]))
    assert started["status"] == "started"
    listed = [json.loads(line) for line in _text(results[1]).splitlines()]
    assert [t["id"] for t in listed] == [started["task"]]
    deadline = time.monotonic() + 30
    while True:
        _, (shown, events) = _drive(_session(root, normalize_home), [
            ("show_task", {"task": started["task"]}),
            ("task_events", {"task": started["task"], "since": 2})])
        if json.loads(_text(shown))["status"] == "done" or time.monotonic() > deadline:
            break
    assert json.loads(_text(shown))["status"] == "done"
    seqs = [json.loads(line)["seq"] for line in _text(events).splitlines()]
    assert seqs and min(seqs) == 3  # events since sequence number 2
    assert any(json.loads(line)["type"] == "action_finished"
               for line in _text(events).splitlines())


def test_answer_task_answers_a_waiting_task_and_resumes_it(tmp_path: Path,
                                                          normalize_home: Path) -> None:
    root = tmp_path / "ws"
    (root / ".normalize" / "workflows").mkdir(parents=True)
    (root / ".normalize" / "workflows" / "asker.toml").write_text(
        '[workflow]\nname = "asker"\n[[workflow.steps]]\nname = "q"\n'
        'action = "ask Which colour?"\ncapture = "colour"\n'
        '[[workflow.steps]]\nname = "say"\naction = "note chose {colour}"\n')
    _, (started,) = _drive(_session(root, normalize_home, "--allow-run"), [
        ("start_workflow", {"workflow": "asker"})])
    task_id = json.loads(_text(started))["task"]
    _, (shown, refused) = _drive(_session(root, normalize_home, "--allow-run"), [
        ("show_task", {"task": task_id}), ("answer_task", {"task": "nope", "answer": "x"})])
    assert json.loads(_text(shown))["waiting_for"]["question"] == "Which colour?"
    assert refused.is_error and "nope" in _text(refused)
    _, (answered,) = _drive(_session(root, normalize_home, "--allow-run"), [
        ("answer_task", {"task": task_id, "answer": "blue"})])
    assert json.loads(_text(answered)) == {"task": task_id, "status": "resumed"}
    _, (shown, events) = _drive(_session(root, normalize_home), [
        ("show_task", {"task": task_id}), ("task_events", {"task": task_id})])
    assert json.loads(_text(shown))["status"] == "done"
    commands = [json.loads(line).get("command") for line in _text(events).splitlines()]
    assert any(c and c.startswith("note chose") and "blue" in c for c in commands), commands
