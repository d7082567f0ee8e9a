"""`normalize acp` driven by a real ACP client: the SDK's client side, over stdio.

The agent runs as a subprocess (`normalize acp --model scripted:FILE`); the
model is the only fake. One session goes through a whole life: a prompt whose
model plans, reads, edits (the first permission request rejected, the next
allowed), runs the tests and starts a slow command that is cancelled; a
follow-up whose slow command is cut by SIGKILL of the agent; a new agent
process that loads the session (its history replayed) and finishes the task.
Each action's effect happens exactly once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import cast

import pytest
from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    ClientCapabilities,
    FileEditToolCallContent,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from acp_support import AGENT, Editor, agent_env, lines, running_in, until

from normalize.store import TaskStore

BROKEN = 'def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return add(xs[0], 1) / 0\n'
FIXED = 'def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return add(xs[0], 1) / len(xs)\n'
TESTS = 'from calc import mean\n\n\ndef test_mean():\n    assert mean([3]) == 4\n'
CONFTEST = 'with open("pytest.log", "a") as log:\n    log.write("ran\\n")\n'
SLOW = ('import time\nwith open("slow.log", "a") as log:\n    log.write("slow\\n")\n'
        'time.sleep(60)\n')
EDIT = '''The division is wrong.
edit calc.py <<EOF
<<<<<<< SEARCH
    return add(xs[0], 1) / 0
=======
    return add(xs[0], 1) / len(xs)
>>>>>>> REPLACE
EOF'''
SCRIPT = [
    "Looking first.\nplan fix mean; run the tests\nview calc.py",
    EDIT,  # rejected by the person
    EDIT,  # allowed
    "run python -m pytest -q",
    "run python slow.py",  # cancelled mid-run
    "run python slow.py",  # after the follow-up; the agent is killed mid-run
    "done Fixed the division in mean.",  # closes the plan's first subtask
    "done The tests pass.",  # the second
    "done Fixed mean; the tests pass.",  # the task
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name, text in {"calc.py": BROKEN, "test_calc.py": TESTS, "conftest.py": CONFTEST,
                       "slow.py": SLOW}.items():
        (root / name).write_text(text)
    return root


def test_a_session_is_a_task_through_cancel_and_kill(repo: Path, tmp_path: Path,
                                                     normalize_home: Path) -> None:
    script = tmp_path / "model.json"
    script.write_text(json.dumps(SCRIPT))
    argv = [*AGENT, "--model", f"scripted:{script}"]
    env = agent_env(normalize_home)
    first = Editor(["reject_once"])  # then allow everything
    second = Editor([])

    async def first_process() -> str:
        async with spawn_agent_process(cast(Client, first), sys.executable, *argv, env=env,
                                       cwd=repo) as (conn, proc):
            hello = await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                          client_capabilities=ClientCapabilities())
            assert hello.agent_capabilities is not None
            assert hello.agent_capabilities.load_session is True
            prompts = hello.agent_capabilities.prompt_capabilities
            assert prompts is not None and prompts.embedded_context and not prompts.image
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            assert session.modes is not None and session.modes.current_mode_id == "auto"
            assert {m.id for m in session.modes.available_modes} == {"ask", "auto", "yes",
                                                                     "never"}
            await conn.set_session_mode(session_id=session.session_id, mode_id="ask")

            turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                     prompt=[text_block("fix mean")]))
            await until(lambda: lines(repo / "slow.log") == 1, "the slow command")
            await conn.cancel(session_id=session.session_id)
            answer = await asyncio.wait_for(turn, 60)
            assert answer.stop_reason == "cancelled"

            turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                     prompt=[text_block("go on")]))
            await until(lambda: lines(repo / "slow.log") == 2, "the slow command again")
            proc.kill()  # SIGKILL: as an editor's crash would leave it
            await proc.wait()
            with pytest.raises(Exception):  # noqa: B017  (the connection is gone)
                await asyncio.wait_for(turn, 30)
            return session.session_id

    session_id = asyncio.run(first_process())

    # the first prompt's updates, in order: plan, view, edit refused, edit with its diff,
    # the tests, the slow command cancelled
    titles = first.titles()
    calls = first.tool_updates()
    keys = list(dict.fromkeys(key for _, key, _ in calls))
    shown = [titles[key] for key in keys]
    assert shown[:6] == ["plan fix mean; run the tests", "view calc.py", "edit calc.py",
                         "edit calc.py", "run python -m pytest -q", "run python slow.py"]
    for key in keys[:5]:  # each started, then ended
        assert [(kind, status) for kind, k, status in calls if k == key] == [
            ("start", "in_progress"),
            ("update", "failed" if key == keys[2] else "completed")]
    assert [(k, s) for kind, k, s in calls if k == keys[5]][-1] == (keys[5], "failed")
    edit = next(u for u in first.updates if isinstance(u, ToolCallProgress)
                and u.tool_call_id == keys[3])
    diff = [c for c in edit.content or [] if isinstance(c, FileEditToolCallContent)]
    assert len(diff) == 1 and diff[0].path == str(repo / "calc.py")
    assert (diff[0].old_text, diff[0].new_text) == (BROKEN, FIXED)
    plans = [u for u in first.updates if isinstance(u, AgentPlanUpdate)]
    assert [e.content for e in plans[0].entries] == ["fix mean", "run the tests"]
    order = [type(u).__name__ for u in first.updates]
    assert order.index("AgentPlanUpdate") > order.index("ToolCallStart")
    assert any(isinstance(u, AgentMessageChunk) for u in first.updates)
    # the permission requests: the edit (rejected), the edit again, the tests, each slow run
    asked = [call.title for call, _ in first.asked]
    assert len(asked) == 5 and asked[0] == asked[1] and "edit" in (asked[0] or "")
    assert [call.tool_call_id for call, _ in first.asked][:2] == [keys[2], keys[3]]
    assert {o.kind for o in first.asked[0][1]} == {"allow_once", "allow_always", "reject_once"}
    assert "@@" in str(first.asked[0][0].content)  # the change shown before the answer

    async def second_process() -> str:
        async with spawn_agent_process(cast(Client, second), sys.executable, *argv, env=env,
                                       cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            await conn.load_session(cwd=str(repo), session_id=session_id, mcp_servers=[])
            replayed = len(second.updates)
            assert replayed > 0
            answer = await asyncio.wait_for(conn.prompt(session_id=session_id,
                                                        prompt=[text_block("continue")]), 60)
            assert answer.stop_reason == "end_turn"
            return str(replayed)

    replayed = int(asyncio.run(second_process()))
    history = second.updates[:replayed]
    said = [u.content.text for u in history if isinstance(u, UserMessageChunk)]
    assert said == ["fix mean", "go on"]
    assert [u.title for u in history if isinstance(u, ToolCallStart)][:6] == shown[:6]
    live = second.updates[replayed:]
    assert any(isinstance(u, AgentMessageChunk) and "Fixed mean; the tests pass" in u.content.text
               for u in live)

    # each effect exactly once: the edit, the test run, each slow command (none still running)
    assert [p for p in running_in(repo) if "slow.py" in p] == []
    assert (repo / "calc.py").read_text() == FIXED
    assert lines(repo / "pytest.log") == 1
    assert lines(repo / "slow.log") == 2
    store = TaskStore()
    task = store.load(session_id)
    assert task.status.value == "done" and task.goal == "fix mean"
    finished = [e for e in store.events(session_id) if e["type"] == "action_finished"]
    edits = [e["status"] for e in finished if e["tool"] == "edit"]
    assert edits == ["blocked", "success"]
    assert [e["status"] for e in finished if e["command"] == "run python slow.py"] == [
        "interrupted", "interrupted"]
