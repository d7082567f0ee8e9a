"""A small ACP agent for the `acp` driver's tests, written with the SDK's agent side.

It tries one write outside the workspace on its own (its sandbox must refuse
it), then asks its client for everything: it reads calc.py, writes the fix and a note,
runs a command that logs its run, a destructive one (normalize's policy must
refuse it), one that writes outside the workspace (the sandbox must refuse
it), and, when slow.py exists, a slow command (the tests kill normalize during
it). Told that its last turn was interrupted, it just ends the turn; told `note TEXT` (a
follow-up), it writes TEXT to more.txt; told `inside` (a follow-up), it reports five tool
calls: it writes own.txt itself, reads a file (changing nothing), writes asked.txt through
the client, runs a program itself that writes own.log, and reads calc.py through the client
to write its copy itself.
Each step is said as it goes (`agent_message_chunk`), and the turn ends with a
summary of what it saw.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallLocation,
    ToolCallUpdate,
)

OUTSIDE = sys.argv[1] if len(sys.argv) > 1 else "/nonexistent/outside.txt"


class Peer:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=min(protocol_version, PROTOCOL_VERSION),
                                  agent_capabilities=AgentCapabilities(load_session=True))

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        session = f"peer-{len(self.cwd) + 1}"
        self.cwd[session] = Path(cwd)
        return NewSessionResponse(session_id=session)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        self.cwd[session_id] = Path(cwd)
        await self.say(session_id, "loaded my session again")
        return LoadSessionResponse()

    async def say(self, session: str, text: str) -> None:
        await self.conn.session_update(session_id=session,
                                       update=update_agent_message(text_block(text + "\n")))

    async def run(self, session: str, *argv: str) -> tuple[str, int | None]:
        made = await self.conn.create_terminal(session_id=session, command=argv[0],
                                               args=list(argv[1:]))
        ended = await self.conn.wait_for_terminal_exit(session_id=session,
                                                       terminal_id=made.terminal_id)
        shown = await self.conn.terminal_output(session_id=session, terminal_id=made.terminal_id)
        await self.conn.release_terminal(session_id=session, terminal_id=made.terminal_id)
        return shown.output, ended.exit_code

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        words = " ".join(getattr(block, "text", "") for block in prompt)
        if "interrupted" in words:
            await self.say(session_id, "picking up after the interruption: all done")
            return PromptResponse(stop_reason="end_turn")
        root = self.cwd[session_id]
        if words.startswith(("permit ", "permit-edit ")):
            await self.permit(session_id, root, words)
            return PromptResponse(stop_reason="end_turn")
        if words == "inside":
            await self.inside(session_id, root)
            return PromptResponse(stop_reason="end_turn")
        if words.startswith("note "):  # a follow-up: one more file
            await self.conn.write_text_file(session_id=session_id, path=str(root / "more.txt"),
                                            content=words.removeprefix("note ") + "\n")
            await self.say(session_id, "noted")
            return PromptResponse(stop_reason="end_turn")
        try:  # without asking the client: the sandbox it runs in must refuse this
            Path(OUTSIDE).with_name("direct.txt").write_text("escaped on my own")
            direct = "written"
        except OSError:
            direct = "refused"
        seen = await self.conn.read_text_file(session_id=session_id, path=str(root / "calc.py"))
        await self.say(session_id, f"calc.py has {len(seen.content.splitlines())} lines")
        fixed = seen.content.replace("/ 0", "/ len(xs)")
        await self.conn.write_text_file(session_id=session_id, path=str(root / "calc.py"),
                                        content=fixed)
        await self.conn.write_text_file(session_id=session_id, path=str(root / "notes.txt"),
                                        content="fixed the division\n")
        logged = await self.run(session_id, sys.executable, "-c",
                                "open('ran.log', 'a').write('ran\\n'); print('logged')")
        removed = await self.run(session_id, "rm", "-rf", "keep")
        outside = await self.run(session_id, sys.executable, "-c",
                                 f"open({OUTSIDE!r}, 'w').write('escaped')")
        if (root / "slow.py").exists():
            await self.run(session_id, sys.executable, "slow.py")
        await self.say(session_id, f"logged: {logged[1]}; rm: {removed[1]} {removed[0][:80]!r}; "
                                   f"outside: {outside[1]}; direct: {direct}")
        return PromptResponse(stop_reason="end_turn")

    async def call(self, session: str, call: str, title: str, kind: Any, work: Any) -> None:
        """One tool call, reported as started then completed around `work`."""
        await self.conn.session_update(session_id=session, update=start_tool_call(
            call, title, kind=kind, status="in_progress"))
        await work
        await self.conn.session_update(session_id=session, update=update_tool_call(
            call, status="completed"))

    async def copy(self, session: str, root: Path) -> None:
        """Read calc.py through the client, write its copy itself."""
        seen = await self.conn.read_text_file(session_id=session, path=str(root / "calc.py"))
        (root / "calc_copy.txt").write_text(seen.content)

    async def inside(self, session: str, root: Path) -> None:
        async def own() -> None:
            (root / "own.txt").write_text("mine\n")

        async def program() -> None:
            ran = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "open('own.log', 'w').write('ran\\n')", cwd=root)
            await ran.wait()

        await self.call(session, "c-own", "Write own.txt", "edit", own())
        await self.call(session, "c-read", "Read calc.py", "read", asyncio.sleep(0))
        await self.call(session, "c-asked", "Write asked.txt", "edit",
                        self.conn.write_text_file(session_id=session,
                                                  path=str(root / "asked.txt"), content="A\n"))
        await self.call(session, "c-run", "python3 -c …", "execute", program())
        await self.call(session, "c-mixed", "Copy calc.py", "edit", self.copy(session, root))
        await self.say(session, "four calls")

    async def permit(self, session: str, root: Path, words: str) -> None:
        """Ask permission first, as codex-acp and Gemini CLI do, then act on its own (a
        command in a shell, or a file written): only when the answer is an allow."""
        verb, _, what = words.partition(" ")
        if verb == "permit":
            call = ToolCallUpdate(tool_call_id="p-1", title=what, kind="execute",
                                  raw_input={"command": ["bash", "-lc", what]})
        else:
            call = ToolCallUpdate(tool_call_id="p-1", title=f"Write {what}", kind="edit",
                                  locations=[ToolCallLocation(path=str(root / what))])
        options = [PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="always", name="Always", kind="allow_always"),
                   PermissionOption(option_id="no", name="Reject", kind="reject_once")]
        answer = await self.conn.request_permission(session_id=session, tool_call=call,
                                                    options=options)
        chosen = getattr(answer.outcome, "option_id", "cancelled")
        if chosen in ("yes", "always"):
            if verb == "permit":
                ran = await asyncio.create_subprocess_exec("/bin/sh", "-c", what, cwd=root)
                await ran.wait()
            else:
                (root / what).write_text("permitted\n")
        await self.say(session, f"answer: {chosen}")

    async def cancel(self, **_: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(Peer()))  # type: ignore[arg-type]
