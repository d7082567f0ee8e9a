"""`normalize acp`'s smaller promises, each through the SDK's client side and a subprocess.

A question the model asks ends the prompt and the next prompt answers it (and
a loaded session replays that answer as the person's words); the `never` mode
refuses a write without asking; and requests normalize cannot serve are
refused with a message the editor can show.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import cast

import pytest
from acp import PROTOCOL_VERSION, Client, RequestError, image_block, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    FileEditToolCallContent,
    McpServerStdio,
    SseMcpServer,
    ToolCallProgress,
    UserMessageChunk,
)
from acp_support import AGENT, Editor, agent_env, lines, running_in, until

from normalize.store import TaskStore


def said(editor: Editor) -> str:
    return "".join(u.content.text for u in editor.updates if isinstance(u, AgentMessageChunk))


def test_a_question_is_answered_by_the_next_prompt_and_never_refuses(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["ask Which function should I fix?",
                                  "write new.txt <<EOF\nhi\nEOF",
                                  "done Nothing written: the approval mode is never."]))
    argv = [*AGENT, "--model", f"scripted:{script}"]
    editor, later = Editor([]), Editor([])

    async def ask_then_answer() -> str:
        async with spawn_agent_process(cast(Client, editor), sys.executable, *argv,
                                       env=agent_env(normalize_home), cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            session = (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=session, mode_id="never")
            first = await conn.prompt(session_id=session, prompt=[text_block("tidy up")])
            assert first.stop_reason == "end_turn"
            assert said(editor).rstrip().endswith("Which function should I fix?")
            second = await conn.prompt(session_id=session, prompt=[text_block("mean")])
            assert second.stop_reason == "end_turn"
            for answer in (first, second):  # each prompt's own tokens (an estimate, scripted)
                assert answer.usage is not None and answer.usage.input_tokens > 0
                assert answer.usage.total_tokens == (answer.usage.input_tokens
                                                     + answer.usage.output_tokens)
            task = TaskStore().load(session)
            assert task.usage.input_tokens == sum(a.usage.input_tokens for a in (first, second)
                                                  if a.usage is not None)
            return session

    session = asyncio.run(ask_then_answer())
    assert "Nothing written" in said(editor)
    assert editor.asked == []  # `never` refuses; it asks nobody
    refused = [u for u in editor.updates if isinstance(u, ToolCallProgress)
               and u.status == "failed"]
    assert len(refused) == 1 and "never" in str(refused[0].content)
    assert not (repo / "new.txt").exists()
    events = list(TaskStore().events(session))
    assert [(e["kind"], e["answer"]) for e in events if e["type"] == "input_received"] == [
        ("question", "mean")]

    async def load() -> None:
        async with spawn_agent_process(cast(Client, later), sys.executable, *argv,
                                       env=agent_env(normalize_home), cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            loaded = await conn.load_session(cwd=str(repo), session_id=session,
                                             mcp_servers=[])
            assert loaded is not None and loaded.modes is not None

    asyncio.run(load())
    assert [u.content.text for u in later.updates if isinstance(u, UserMessageChunk)] == [
        "tidy up", "mean"]


def test_what_normalize_cannot_serve_is_refused_in_words(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["done nothing to do"]))
    (normalize_home / "tasks").mkdir(exist_ok=True)
    (normalize_home.parent / "outside.json").write_text("{}")  # what ../../outside would name
    keyless = {k: v for k, v in agent_env(normalize_home).items()
               if k not in ("ANTHROPIC_API_KEY", "NORMALIZE_MODEL")}

    async def refusals() -> list[str]:
        errors = []
        async with spawn_agent_process(cast(Client, Editor([])), sys.executable, *AGENT,
                                       "--model", f"scripted:{script}",
                                       env=agent_env(normalize_home), cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            for call in (
                lambda: conn.new_session(cwd="repo", mcp_servers=[]),
                lambda: conn.load_session(cwd=str(repo), session_id="0badf00d", mcp_servers=[]),
                lambda: conn.load_session(cwd=str(repo), session_id="../../outside",
                                          mcp_servers=[]),
            ):
                with pytest.raises(RequestError) as caught:
                    await call()
                errors.append(str(caught.value))
            session = (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
            with pytest.raises(RequestError) as caught:
                await conn.prompt(session_id=session,
                                  prompt=[image_block("aGk=", "image/png")])
            errors.append(str(caught.value))
            done = await conn.prompt(session_id=session, prompt=[text_block("look")])
            assert done.stop_reason == "end_turn"
            with pytest.raises(RequestError) as caught:  # a task of another workspace
                await conn.load_session(cwd=str(other), session_id=session, mcp_servers=[])
            errors.append(str(caught.value))
        async with spawn_agent_process(cast(Client, Editor([])), sys.executable, *AGENT,
                                       "--model", "anthropic:claude-sonnet-4-5",
                                       env=keyless, cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            with pytest.raises(RequestError) as caught:
                await conn.new_session(cwd=str(repo), mcp_servers=[])
            errors.append(str(caught.value))
        return errors

    relative, unknown, traversal, image, elsewhere, keyless_error = asyncio.run(refusals())
    assert "no task ../../outside" in traversal, traversal
    assert "not an absolute path" in relative
    assert "no task 0badf00d" in unknown
    assert "no images" in image
    assert f"not in {other}" in elsewhere
    assert "ANTHROPIC_API_KEY" in keyless_error
    assert os.listdir(repo) == []  # nothing was written for any of them


def test_the_editors_mcp_servers_join_the_task(tmp_path: Path, normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["mcp fixture echo text=hello times=2", "done echoed"]))
    fixture = Path(__file__).parent.parent / "mcp" / "fixture_server.py"
    editor = Editor([])

    async def session() -> str:
        async with spawn_agent_process(cast(Client, editor), sys.executable, *AGENT,
                                       "--model", f"scripted:{script}", "--approve", "yes",
                                       env=agent_env(normalize_home), cwd=repo) as (conn, _):
            hello = await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                          client_capabilities=ClientCapabilities())
            assert hello.agent_capabilities is not None
            mcp = hello.agent_capabilities.mcp_capabilities
            assert mcp is not None and mcp.http and not mcp.sse
            session = (await conn.new_session(cwd=str(repo), mcp_servers=[
                McpServerStdio(name="fixture", command=sys.executable, args=[str(fixture)],
                               env=[]),
                SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[]),
            ])).session_id
            answer = await conn.prompt(session_id=session, prompt=[text_block("echo")])
            assert answer.stop_reason == "end_turn"
            return session

    session_id = asyncio.run(session())
    assert "MCP server 'old' not used" in said(editor)
    echoed = [u for u in editor.updates if isinstance(u, ToolCallProgress)]
    assert echoed[0].status == "completed" and "hello hello" in str(echoed[0].content)
    servers = TaskStore().load(session_id).config.mcp_servers or ()
    assert [s["name"] for s in servers] == ["fixture"]


def test_an_editor_that_closes_the_pipe_leaves_the_task_saved(tmp_path: Path,
                                                              normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "slow.py").write_text('import time\nopen("slow.log", "a").write("slow\\n")\n'
                                  'time.sleep(60)\n')
    script = tmp_path / "model.json"
    script.write_text(json.dumps(["run python slow.py", "done the slow run was cut short"]))
    argv = [*AGENT, "--model", f"scripted:{script}", "--approve", "yes"]
    editor = Editor([])

    async def close_mid_run() -> tuple[str, int | None, float]:
        async with spawn_agent_process(cast(Client, editor), sys.executable, *argv,
                                       env=agent_env(normalize_home), cwd=repo) as (conn, proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            session = (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=session,
                                                     prompt=[text_block("go")]))
            await until(lambda: (repo / "slow.log").exists(), "the slow command")
            started = time.monotonic()
            assert proc.stdin is not None
            proc.stdin.close()  # the editor quits
            code = await asyncio.wait_for(proc.wait(), 30)
            with pytest.raises(ConnectionError):
                await turn
            return session, code, time.monotonic() - started

    session, code, took = asyncio.run(close_mid_run())
    assert code == 0 and took < 15
    assert TaskStore().load(session).status.value == "interrupted"
    assert [p for p in running_in(repo) if "slow.py" in p] == []
    assert lines(repo / "slow.log") == 1

    async def go_on() -> str:
        async with spawn_agent_process(cast(Client, Editor([])), sys.executable, *argv,
                                       env=agent_env(normalize_home), cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            await conn.load_session(cwd=str(repo), session_id=session, mcp_servers=[])
            answer = await conn.prompt(session_id=session, prompt=[text_block("")])
            return answer.stop_reason

    assert asyncio.run(go_on()) == "end_turn"
    assert TaskStore().load(session).status.value == "done"
    assert lines(repo / "slow.log") == 1


def test_a_diff_shown_to_the_editor_is_redacted_as_the_journal_is(tmp_path: Path,
                                                                   normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = "tok-5f1e2d3c4b5a6978"
    script = tmp_path / "model.json"
    script.write_text(json.dumps([f"write notes.txt <<EOF\nuse {secret}\nEOF", "done noted"]))
    env = {**agent_env(normalize_home), "SERVICE_TOKEN": secret}
    editor = Editor([])

    async def write() -> None:
        async with spawn_agent_process(cast(Client, editor), sys.executable, *AGENT, "--model",
                                       f"scripted:{script}", "--approve", "ask", env=env,
                                       cwd=repo) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            session = (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id
            await conn.prompt(session_id=session, prompt=[text_block("note the token")])

    asyncio.run(write())
    assert (repo / "notes.txt").read_text() == f"use {secret}\n"  # the effect is exact
    diffs = [c for u in editor.updates if isinstance(u, ToolCallProgress)
             for c in u.content or [] if isinstance(c, FileEditToolCallContent)]
    assert len(diffs) == 1 and "[REDACTED]" in diffs[0].new_text
    asked = str(editor.asked[0][0].content)
    assert "[REDACTED]" in asked and secret not in asked
    assert secret not in repr(editor.updates)
