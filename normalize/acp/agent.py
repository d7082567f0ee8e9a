"""`normalize acp`: normalize as an Agent Client Protocol agent, each session a normalize task.

An editor (the ACP client) starts `normalize acp` and speaks JSON-RPC on its
stdin and stdout. `session/new` takes the client's `cwd` as the workspace
(its workflows and permissions under the usual trust rules) and gives out the
id the task will have; the first `session/prompt` starts that task with the
prompt as its goal, and each later prompt continues it: the answer to its
question when it waits for one, else a follow-up instruction. A run goes
through the runner as `normalize agent`'s does (same engine, journal,
checkpoints, sandbox); its events become `session/update`s
(`normalize.acp.updates`). An approval the policy gives to a person becomes
`session/request_permission` (allow once / always / reject), answered through
the approver a terminal uses, so it is journaled alike. A client that reads
files (`fs.readTextFile`) is asked for each file the task's `view` shows: the
model sees the editor's buffer, unsaved changes included, told when it differs
from the disk (which edits, programs and checkpoints keep using). `session/cancel` is
Ctrl-C: the run stops at its next safe point, the task is saved, the prompt
answers `cancelled`. `session/load` replays a task's journal as updates; the
next prompt resumes it, as `normalize resume` would after a crash.

The engine is synchronous: each prompt's run has a thread of its own, and an
`Outbox` carries its updates (and permission requests) to the event loop in
order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    text_block,
    tool_content,
    update_agent_message_text,
)
from acp.schema import (
    AgentCapabilities,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    RequestPermissionResponse,
    ResourceContentBlock,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
    ToolCallUpdate,
    Usage,
)

from normalize.acp.updates import LiveUpdates, Update, replayed
from normalize.cancel import CancelToken
from normalize.engine import Reply, RunOutcome
from normalize.errors import NormalizeError
from normalize.runner import RunOptions
from normalize.store import TaskStore
from normalize.task import TaskStatus, new_task_id
from normalize.tools.approval import Question

MODES = {
    "ask": "every side effect asks you first",
    "auto": "edits and sandboxed commands run; what leaves the sandbox asks",
    "yes": "everything the policy allows runs without asking",
    "never": "nothing that would ask runs (it is refused)",
}
ANSWERS = {"allow_once": "yes", "allow_always": "always"}
POLL = 0.2
READ_TIMEOUT = 10.0
"""Seconds a `view` waits for the client's `fs/read_text_file` before reading the disk."""
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a session id (a task id) may hold: nothing that could name a path."""
"""Seconds between looks at the cancel token while a permission request is open."""


@dataclass(frozen=True)
class AcpSettings:
    """What `normalize acp`'s flags chose for every session."""

    model: str | None = None
    base_url: str | None = None
    approve: str | None = None
    sandbox: str | None = None
    workflow: str = "dwim"


@dataclass
class Session:
    """One ACP session: the task it is (made at its first prompt) and its run, if one is on."""

    id: str
    workspace: Path
    mode: str
    mode_chosen: bool = False  # by `--approve` or `session/set_mode`: it binds each run
    started: bool = False  # the task exists
    cancel: CancelToken | None = None  # the run's, while one is on
    cancelled: bool = False  # the client cancelled the run on (the engine re-arms the token)
    store: TaskStore | None = None
    runs: list[asyncio.Future[PromptEnd]] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)  # the client's MCP servers
    notes: list[str] = field(default_factory=list)  # said at the next prompt's start


@dataclass(frozen=True)
class PromptEnd:
    """How a prompt's run ended: the task's status, the tokens the run used."""

    status: TaskStatus
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class _Ask:
    """A permission request on its way: the question, the tool call, the answer to come."""

    update: ToolCallUpdate
    options: list[PermissionOption]
    answer: concurrent.futures.Future[RequestPermissionResponse] = field(
        default_factory=concurrent.futures.Future)


class Outbox:
    """Carries one run's updates and permission requests to the client, in order.

    The run's thread calls `send` and `ask`; one task on the event loop sends
    each in turn. `close` waits until everything queued has gone.
    """

    def __init__(self, conn: Any, session_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.session_id = session_id
        self.loop = loop
        self.queue: asyncio.Queue[Update | _Ask | None] = asyncio.Queue()
        self.gone = False  # the client went away: nothing more is sent
        self.pump = loop.create_task(self._pump())

    def send(self, update: Update) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, update)

    def ask(self, question: str, tool_call_id: str, cancel: CancelToken,
            redact: Callable[[str], str] = str) -> str:
        """Ask the client about an action (from the run's thread): yes, always or no."""
        detail = redact(question.detail) if isinstance(question, Question) else ""
        always = question.always if isinstance(question, Question) else ""
        update = ToolCallUpdate(tool_call_id=tool_call_id or "approval", title=str(question),
                                status="pending",
                                content=[tool_content(text_block(detail))] if detail else None)
        ask = _Ask(update, permission_options(always))
        self.loop.call_soon_threadsafe(self.queue.put_nowait, ask)
        while True:
            try:
                response = ask.answer.result(timeout=POLL)
                break
            except concurrent.futures.TimeoutError:
                if cancel.cancelled:
                    ask.answer.cancel()
                    return "no"
            except (concurrent.futures.CancelledError, ConnectionError, RequestError):
                return "no"
        outcome = response.outcome
        return ANSWERS.get(getattr(outcome, "option_id", ""), "no")

    async def close(self) -> None:
        self.queue.put_nowait(None)
        await self.pump

    async def _pump(self) -> None:
        while (item := await self.queue.get()) is not None:
            if self.gone:
                if isinstance(item, _Ask):
                    item.answer.cancel()
                continue
            try:
                if isinstance(item, _Ask):
                    await self._request(item)
                else:
                    await self.conn.session_update(self.session_id, item)
            except (ConnectionError, OSError):
                self.gone = True

    async def _request(self, ask: _Ask) -> None:
        """Send a permission request; give its answer to the run unless the run gave up."""
        request = asyncio.ensure_future(self.conn.request_permission(
            session_id=self.session_id, tool_call=ask.update, options=ask.options))
        while not request.done() and not ask.answer.cancelled():
            await asyncio.wait({request}, timeout=POLL)
        if not request.done():
            request.cancel()
            return
        error = request.exception()
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # the run gave up
            if error is not None:
                ask.answer.set_exception(error)
            else:
                ask.answer.set_result(request.result())
        if isinstance(error, ConnectionError):
            raise error


def permission_options(always: str) -> list[PermissionOption]:
    """Allow once / always (saying what `always` lets through) / reject."""
    return [PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
            PermissionOption(option_id="allow_always",
                             name=f"Always allow ({always})" if always else "Always allow",
                             kind="allow_always"),
            PermissionOption(option_id="reject_once", name="Reject", kind="reject_once")]


def prompt_text(blocks: list[Any]) -> str:
    """The prompt's words: its text, each file it links, each file it embeds (text only)."""
    parts = []
    for block in blocks:
        match block:
            case TextContentBlock():
                parts.append(block.text)
            case ResourceContentBlock():
                parts.append(f"(file: {block.uri})")
            case EmbeddedResourceContentBlock() if isinstance(block.resource,
                                                              TextResourceContents):
                parts.append(f"{block.resource.uri}:\n{block.resource.text}")
            case _:
                raise RequestError(-32602, "normalize takes text, file links and embedded "
                                           "text files in a prompt (no images or audio)")
    return "\n".join(parts)


def modes(current: str) -> SessionModeState:
    return SessionModeState(current_mode_id=current, available_modes=[
        SessionMode(id=mode, name=mode, description=text) for mode, text in MODES.items()])


def refused(exc: NormalizeError) -> RequestError:
    """A normalize error as the JSON-RPC error the client shows."""
    hint = getattr(exc, "hint", None)
    return RequestError(-32602, f"{exc}{f' ({hint})' if hint else ''}")


class NormalizeAgent:
    """The ACP agent side: sessions that are normalize tasks (see the module docstring)."""

    def __init__(self, settings: AcpSettings) -> None:
        self.settings = settings
        self.sessions: dict[str, Session] = {}
        self.conn: Any = None
        self.reads = False  # the client reads files (`fs.readTextFile`): views show its buffers

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         **_: Any) -> InitializeResponse:
        files = getattr(client_capabilities, "fs", None)
        self.reads = bool(files is not None and files.read_text_file)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False,
                                                       embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False)),
            agent_info=Implementation(name="normalize", title="normalize",
                                      version=_version()),
            auth_methods=[])

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
                          ) -> NewSessionResponse:
        root = self._workspace(cwd)
        try:
            spec = self._spec(root)
            mode = self.settings.approve or self._mode_of(spec, root)
            await asyncio.to_thread(_check_model, spec)
        except NormalizeError as exc:
            raise refused(exc) from None
        store = RunOptions(workspace=root).task_store()
        session_id = new_task_id()
        while store.task_path(session_id).exists():
            session_id = new_task_id()
        servers, notes = client_servers(mcp_servers)
        self.sessions[session_id] = Session(session_id, root, mode,
                                            mode_chosen=self.settings.approve is not None,
                                            store=store, servers=servers, notes=notes)
        return NewSessionResponse(session_id=session_id, modes=modes(mode))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **_: Any) -> LoadSessionResponse:
        root = self._workspace(cwd)
        options = RunOptions(workspace=root)
        store = options.task_store()
        if not SESSION_ID.fullmatch(session_id) or not store.task_path(session_id).exists():
            raise RequestError(-32602, f"no task {session_id} (a session is the task of that id)")
        try:
            task = store.load(session_id, repair=True)
            mode = self.settings.approve or _task_mode(task)
        except NormalizeError as exc:
            raise refused(exc) from None
        if session_id in self.sessions and self.sessions[session_id].cancel is not None:
            raise RequestError(-32600, f"session {session_id} is working on a prompt")
        if Path(task.workspace) != root:
            raise RequestError(-32602, f"task {session_id} works in {task.workspace}, "
                                       f"not in {root}")
        for update in replayed(store.events(session_id), root):
            await self.conn.session_update(session_id, update)
        servers, notes = client_servers(mcp_servers)
        self.sessions[session_id] = Session(session_id, root, mode,
                                            mode_chosen=self.settings.approve is not None,
                                            started=True, store=store, servers=servers,
                                            notes=notes)
        return LoadSessionResponse(modes=modes(mode))

    async def set_session_mode(self, mode_id: str, session_id: str, **_: Any
                               ) -> SetSessionModeResponse:
        session = self._session(session_id)
        if mode_id not in MODES:
            raise RequestError(-32602, f"unknown mode {mode_id!r} (choose from "
                                       f"{', '.join(MODES)})")
        session.mode, session.mode_chosen = mode_id, True
        return SetSessionModeResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.cancel is not None:
            raise RequestError(-32600, f"session {session_id} is still working on the last "
                                       f"prompt: cancel it first")
        text = prompt_text(prompt)
        if not session.started and not text.strip():
            raise RequestError(-32602, "the prompt is empty: say what the agent should do")
        loop = asyncio.get_running_loop()
        outbox = Outbox(self.conn, session_id, loop)
        session.cancel, session.cancelled = CancelToken(), False
        cancel = session.cancel
        run = loop.run_in_executor(None, self._turn, session, text, outbox, cancel)
        session.runs = [*(r for r in session.runs if not r.done()), run]
        try:
            outcome = await asyncio.shield(run)
        except asyncio.CancelledError:  # the client went away: stop at the next safe point
            cancel.cancel()
            raise
        except NormalizeError as exc:
            raise refused(exc) from None
        finally:
            await outbox.close()
            session.cancel = None
        if session.cancelled:
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="max_turn_requests"
                              if outcome.status is TaskStatus.LIMIT else "end_turn",
                              usage=Usage(input_tokens=outcome.input_tokens,
                                          output_tokens=outcome.output_tokens,
                                          total_tokens=outcome.input_tokens
                                          + outcome.output_tokens))

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.cancel is not None:
            session.cancelled = True
            session.cancel.cancel()

    async def authenticate(self, **_: Any) -> None:
        raise RequestError(-32602, "normalize needs no authentication (the model's key comes "
                                   "from its environment)")

    def stop(self) -> None:
        """The client went away: every run stops at its next safe point, saved (resumable)."""
        for session in self.sessions.values():
            if session.cancel is not None:
                session.cancel.cancel()

    # -- the run, in its own thread ------------------------------------------------------

    def _turn(self, session: Session, text: str, outbox: Outbox,
              cancel: CancelToken) -> PromptEnd:
        redact = session.store.redact if session.store is not None else None
        live = LiveUpdates(session.workspace, outbox.send, redact or str)
        outcome = self._run(session, text, outbox, cancel, live)
        return PromptEnd(outcome.status, live.tokens[0], live.tokens[1])

    def _run(self, session: Session, text: str, outbox: Outbox, cancel: CancelToken,
             live: LiveUpdates) -> RunOutcome:
        """Start the session's task with `text`, or continue it (an answer, a follow-up)."""
        from normalize.runner import follow_up, open_task, run_task, start_task

        for note in session.notes:
            outbox.send(update_agent_message_text(f"normalize: {note}\n"))
        session.notes.clear()
        options = RunOptions(
            workspace=session.workspace, subscribers=[live], cancel=cancel, interactive=True,
            approve=session.mode if session.mode_chosen else None,
            sandbox=self.settings.sandbox, store=session.store,
            approver=lambda question: outbox.ask(question, live.current, cancel, live.redact),
            tools=self._tools(session, outbox.loop))
        if not session.started:
            spec = self._spec(session.workspace)
            task = start_task(spec, text, options, task_id=session.id)
            session.started = True
            with_servers(task, session.servers)
            return run_task(task, options)
        task = open_task(session.id, options)
        with_servers(task, session.servers)
        reply = None
        if task.pending is not None:
            reply = Reply(answer=text)
        elif text.strip():
            follow_up(task, text)
        return run_task(task, options, resumed=True, reply=reply)

    def _tools(self, session: Session, loop: asyncio.AbstractEventLoop) -> Any:
        """The run's tools: the built-ins, with a `view` that reads the client's buffers when
        it reads files (None: the built-ins as they are)."""
        if not self.reads:
            return None
        from normalize.tools import default_tools
        from normalize.tools.view import ViewTool

        def read(path: Path) -> str | None:  # (on the run's thread)
            asked = asyncio.run_coroutine_threadsafe(
                self.conn.read_text_file(session_id=session.id, path=str(path)), loop)
            try:
                return str(asked.result(timeout=READ_TIMEOUT).content)
            except Exception:  # the client's error, whatever its type, or no answer: the disk
                asked.cancel()
                return None

        tools = default_tools()
        tools.register(ViewTool(buffers=read))
        return tools

    # -- helpers -------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(-32602, f"no session {session_id} in this process "
                                       f"(session/load it first)")
        return session

    def _workspace(self, cwd: str) -> Path:
        root = Path(cwd)
        if not root.is_absolute() or not root.is_dir():
            raise RequestError(-32602, f"cwd {cwd}: not an absolute path to a directory")
        return root.resolve()

    def _spec(self, root: Path) -> Any:
        from normalize.runner import load_spec, with_model

        spec = load_spec(self.settings.workflow, root)
        settings = self.settings
        if spec.llm is not None or settings.model or settings.base_url:
            spec.llm = with_model(spec.llm, settings.model, settings.base_url)
        return spec

    def _mode_of(self, spec: Any, root: Path) -> str:
        from normalize.permissions import resolve_permissions

        return str(resolve_permissions(spec, RunOptions(workspace=root).flags(), root).mode)


def client_servers(given: list[Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The MCP servers the client passed, as normalize's server tables; and why any is left
    out (SSE, HTTP headers and ACP-transport servers are not served yet)."""
    from normalize.errors import ConfigError
    from normalize.mcp.config import parse_server

    servers, notes = [], []
    for server in given or []:
        match server:
            case McpServerStdio():
                table: dict[str, Any] = {"name": server.name, "command": server.command,
                                         "args": list(server.args),
                                         "env": {v.name: v.value for v in server.env}}
            case HttpMcpServer() if not server.headers:
                table = {"name": server.name, "url": server.url}
            case _:
                notes.append(f"MCP server {server.name!r} not used: normalize starts stdio "
                             f"servers and reaches streamable-HTTP ones without headers")
                continue
        try:
            servers.append(parse_server(table, "the editor's MCP servers").to_dict())
        except ConfigError as exc:
            notes.append(f"MCP server {server.name!r} not used: {exc}")
    return servers, notes


def with_servers(task: Any, servers: list[dict[str, Any]]) -> None:
    """Add the client's MCP servers to the task's own (the client's win a shared name)."""
    if not servers:
        return
    names = {server["name"] for server in servers}
    kept = [s for s in task.config.mcp_servers or () if s.get("name") not in names]
    task.config = replace(task.config, mcp_servers=(*kept, *servers))


def _check_model(spec: Any) -> None:
    """Make the workflow's model client once, so a missing key is said before any task."""
    from normalize.drivers.models import LLMSettings
    from normalize.providers.base import close_client
    from normalize.providers.registry import create_client

    if spec.driver != "llm":
        return
    settings = LLMSettings.of(spec.llm)
    if not settings.spec.startswith(("replay:", "scripted:")):
        close_client(create_client(settings.spec, base_url=settings.base_url))


def _task_mode(task: Any) -> str:
    from normalize.permissions import task_permissions

    return str(task_permissions(task, RunOptions(workspace=Path(task.workspace)).flags()).mode)


async def serve(agent: NormalizeAgent, reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter) -> None:
    """Speak ACP on these streams until the client closes them; then stop every run."""
    from acp import Agent, run_agent

    try:  # (the SDK finds each method by name; one this class lacks is "method not found")
        await run_agent(cast(Agent, agent), writer, reader)
    finally:
        agent.stop()
        for session in agent.sessions.values():
            for run in session.runs:
                with contextlib.suppress(Exception):
                    await run


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("normalize")
    except PackageNotFoundError:
        return "unknown"


__all__ = ["AcpSettings", "NormalizeAgent", "serve"]
