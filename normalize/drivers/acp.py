"""The `acp` driver: an Agent Client Protocol agent takes the turns, normalize is its client.

`normalize agent --harness acp:COMMAND "TASK"` starts COMMAND (any ACP agent on
stdio) under the task's sandbox and tells it the client can read and write
text files and run terminals. The agent's prompt turn then runs on its own,
but each file it reads, each file it writes and each command it runs comes
back to normalize as a request, and the driver turns each into one decision
of one action — `view PATH`, `write PATH`, `run ARGV` — that the engine runs
like any other: approved by the task's policy, sandboxed, journaled,
checkpointed one by one (`tasks show`, `diff STEP`, `undo`). The action's
result answers the request (a read answers with the file's text once its
`view` passed the guard; a refused write answers with an error; a terminal
runs its command to the end as the action, and its output and exit status
answer the terminal requests that follow). What the agent says and the tools
it runs inside itself become events (`text_delta`, `harness_tool_called`, …).

The agent's own permission requests (`session/request_permission`, asked before
it runs a command or edits a file inside itself) are answered by normalize's
approval policy: each becomes a `permit` action (`normalize.tools.permit`) holding
what normalize would judge — `run` with the command's words, `edit PATH` — judged
with the run's context (a person asked when one can be); allowed, the agent gets
*allow once*; refused, or needing a person no one can be, *reject*. What it then
asks the client for is judged again as its own action, and what it does without
asking stays inside the sandbox it runs in.
A tool call the agent runs inside itself (Codex's `apply_patch` and commands,
Claude Code's own `Write`) that may change files and asked the client for no
write or terminal while it ran gets a `record` action when the agent says it ended: the
step after it holds what the call changed, so `diff STEP` and `undo` address it
on its own.

The driver's state names the agent's session; after a crash the agent starts
again and loads that session when it can (`loadSession`), else gets a new one
with the goal and a note that the last turn was cut short. Follow-up
instructions (`resume ID "…"`) are the next prompts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import shlex
import signal
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

from normalize.contract.driver import DriverServices, RunContext
from normalize.errors import ConfigError, NormalizeError
from normalize.events import (
    HarnessEvent,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    ModelReplied,
    TextDelta,
    ThinkingDelta,
)
from normalize.fsopen import read_bytes
from normalize.sandbox import SandboxMode, SandboxPolicy, SandboxTier, confine, probe
from normalize.task import (
    Action,
    ActionResult,
    Decision,
    ResultStatus,
    Task,
    TaskStatus,
    Usage,
)

STATE_VERSION = 1
START_TIMEOUT = 60.0
POLL = 0.1
INTERRUPTED = ("Your previous turn on this task was interrupted before it finished (the "
               "client stopped). Check what was done and continue with the task:\n\n{goal}")
UNCHANGING = frozenset({"read", "search", "think", "fetch", "switch_mode"})
"""The ACP tool kinds that change no file: their calls get no `record` step."""
RECAP = ("You worked on this task earlier, in a session you no longer have:\n\n{goal}\n\n"
         "Check what was done; then: {text}")
PR_SET_PDEATHSIG = 1
TMPDIR = "$TMPDIR"
"""A value the agent's launch gives a variable that names the agent's own temp directory."""


@dataclass
class _Request:
    """One thing the agent asked the client for: the action that does it, its result to come."""

    action: Action
    result: concurrent.futures.Future[ActionResult] = field(
        default_factory=concurrent.futures.Future)


@dataclass
class _Ended:
    """The agent's prompt turn ended (`stop_reason`), or failed (`error`)."""

    stop_reason: str = ""
    error: str = ""
    usage: Usage | None = None
    """The tokens the turn used, where the agent says (the answer's `usage`)."""


@dataclass
class _Terminal:
    """A terminal the agent made: its command ran to the end as a `run` action."""

    output: str
    exit_code: int | None


class _Client:
    """The ACP client side the agent talks to (on the link's event loop)."""

    def __init__(self, link: _Link) -> None:
        self.link = link

    async def session_update(self, update: Any, **_: Any) -> None:
        self.link.items.put(update)

    async def request_permission(self, options: list[Any], tool_call: Any = None,
                                 **_: Any) -> Any:
        from acp import start_tool_call

        if tool_call is not None:  # (Gemini CLI announces a call only so): a call started
            self.link.items.put(start_tool_call(
                tool_call.tool_call_id, tool_call.title or "", kind=tool_call.kind,
                raw_input=tool_call.raw_input, status="pending"))

        allowed = True
        for judged in _asked(tool_call, self.link.workspace):
            params = {"args": [judged["text"]], "call": tool_call.tool_call_id,
                      **_permit(judged)}
            result = await self.link.ask(Action("permit", params,
                                                text=f"permit {judged['text']}"),
                                         refuse=False)
            allowed = allowed and result.ok
            if not allowed:
                break
        return _answer(options, allowed)

    async def read_text_file(self, path: str, line: int | None = None,
                             limit: int | None = None, **_: Any) -> Any:
        from acp.schema import ReadTextFileResponse

        rel = self.link.relative(path)
        seen = await self.link.ask(Action("view", {"args": [rel]}, text=f"view {rel}"),
                                   refuse=False)
        if not seen.ok:
            if seen.status is ResultStatus.ERROR and not (self.link.workspace / rel).exists():
                # a file not there reads as empty, as an editor's new buffer would (Gemini CLI
                # writes a new file only so: it takes a not-found error for a failure)
                return ReadTextFileResponse(content="")
            raise _error(seen.error or "view failed")
        try:
            text = read_bytes(self.link.workspace, rel).decode("utf-8", "replace")
        except OSError as exc:
            raise _error(f"{rel}: {exc.strerror or exc}") from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start:start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, content: str, path: str, **_: Any) -> Any:
        from acp.schema import WriteTextFileResponse

        rel = self.link.relative(path)
        await self.link.ask(Action("write", {"args": [rel], "body": content},
                                   text=f"write {rel} <<EOF"))
        return WriteTextFileResponse()

    async def create_terminal(self, command: str, args: list[str] | None = None,
                              cwd: str | None = None, **_: Any) -> Any:
        from acp.schema import CreateTerminalResponse

        if cwd is not None and self.link.relative(cwd) != ".":
            raise _error(f"terminals run in the workspace {self.link.workspace}, not in {cwd}")
        argv = [command, *args] if args else _words(command)
        text = f"run {shlex.join(argv)}" if args or argv == [command] else f"run {command}"
        result = await self.link.ask(Action("run", {"args": argv}, text=text), refuse=False)
        terminal = f"term-{len(self.link.terminals) + 1}"
        self.link.terminals[terminal] = _Terminal(result.output or result.error or "",
                                                 result.exit_code)
        return CreateTerminalResponse(terminal_id=terminal)

    async def terminal_output(self, terminal_id: str, **_: Any) -> Any:
        from acp.schema import TerminalExitStatus, TerminalOutputResponse

        done = self.link.terminal(terminal_id)
        return TerminalOutputResponse(output=done.output, truncated=False,
                                      exit_status=TerminalExitStatus(exit_code=done.exit_code))

    async def wait_for_terminal_exit(self, terminal_id: str, **_: Any) -> Any:
        from acp.schema import WaitForTerminalExitResponse

        return WaitForTerminalExitResponse(exit_code=self.link.terminal(terminal_id).exit_code)

    async def kill_terminal(self, terminal_id: str, **_: Any) -> None:
        self.link.terminal(terminal_id)  # its command has already ended

    async def release_terminal(self, terminal_id: str, **_: Any) -> None:
        self.link.terminals.pop(terminal_id, None)


def _relative(workspace: Path, path: str) -> str:
    real = Path(os.path.normpath(path))
    if not real.is_absolute():
        raise _error(f"{path}: ACP paths are absolute")
    try:
        return str(real.relative_to(workspace))
    except ValueError:
        raise _error(f"{path} is outside the workspace {workspace}") from None


def _answer(options: list[Any], allowed: bool) -> Any:
    """The option normalize's verdict picks: allow once, or reject (never an `always`: each
    request is judged again; no reject offered: the request is cancelled)."""
    from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

    kinds = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
    chosen = next((o for kind in kinds for o in options if o.kind == kind), None)
    if chosen is None:
        if allowed and options:
            chosen = options[0]
        else:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                            option_id=chosen.option_id))


SHELLS = frozenset({"sh", "bash", "zsh", "dash"})
PATH_KEYS = ("path", "file_path", "filePath", "abs_path", "absolute_path", "source",
             "destination", "new_path", "old_path")


def _asked(tool_call: Any, workspace: Path) -> list[dict[str, Any]]:
    """What a permission request asks, as the actions normalize judges: `run` with the
    command's words for a command, `edit PATH` for each file it would change ([]: a call
    that changes nothing, such as a read, has nothing to judge)."""
    if tool_call is None:
        return []
    given = tool_call.raw_input if isinstance(tool_call.raw_input, dict) else {}
    command = _command(given.get("command") or given.get("cmd"))
    if command is None and tool_call.kind == "execute":
        command = _command(tool_call.title)
    if command is not None:
        return [{"tool": "run", "args": _words(command), "text": f"run {command}"}]
    if tool_call.kind in UNCHANGING:
        return []
    paths = [str(loc.path) for loc in tool_call.locations or []]
    paths += [str(given[key]) for key in PATH_KEYS if isinstance(given.get(key), str)]
    judged = []
    for path in dict.fromkeys(paths):
        try:
            rel = _relative(workspace, path)
        except Exception as exc:  # outside the workspace: refused, and said
            judged.append({"tool": "edit", "args": [path], "text": f"edit {path}",
                           "refuse": str(exc)})
            continue
        judged.append({"tool": "edit", "args": [rel], "text": f"edit {rel}"})
    if not judged and tool_call.kind in ("edit", "delete", "move"):
        judged.append({"tool": "edit", "args": ["*"], "text": f"edit * ({tool_call.title})"})
    return judged


def _command(value: Any) -> str | None:
    """A command as text: a string as given, words joined (`bash -lc X` as X)."""
    if isinstance(value, list) and value:
        words = [str(word) for word in value]
        if len(words) == 3 and os.path.basename(words[0]) in SHELLS and \
                words[1] in ("-c", "-lc"):
            return words[2]
        return shlex.join(words)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _permit(judged: dict[str, Any]) -> dict[str, Any]:
    refuse = judged.pop("refuse", None)
    return {"judged": judged, **({"refuse": refuse} if refuse else {})}


def _words(command: str) -> list[str]:
    """A terminal's command given without `args` (Claude Code's agent sends a whole command
    line): its words, and its text kept for the policy (shell syntax is refused by `run`
    unless `allow_shell` lets it through a confined shell)."""
    try:
        return shlex.split(command) or [command]
    except ValueError:
        return [command]


def _error(message: str) -> Exception:
    from acp import RequestError

    return RequestError(-32603, message)


class _Link:
    """The agent process (sandboxed) and the client connection to it, on a loop of its own."""

    def __init__(self, argv: list[str], workspace: Path, sandbox: SandboxPolicy, *,
                 env: dict[str, str] | None = None, visible: list[str] | None = None) -> None:
        self.argv, self.workspace, self.sandbox = argv, workspace, sandbox
        self.env, self.visible = dict(env or {}), list(visible or [])
        self.items: queue.Queue[Any] = queue.Queue()  # updates, requests, the turn's end
        self.terminals: dict[str, _Terminal] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="normalize-acp-client")
        self.process: asyncio.subprocess.Process | None = None
        self.confinement: Any = None
        self.conn: Any = None
        self.can_load = False
        self.stderr = tempfile.TemporaryFile(prefix="normalize-acp-")

    def start(self) -> None:
        """Start the agent and say hello; a `ConfigError` naming the command when it fails."""
        self.thread.start()
        try:
            self.call(self._start(), START_TIMEOUT)
        except (OSError, concurrent.futures.TimeoutError, ConnectionError) as exc:
            said = self.stderr_tail()
            self.close()
            raise ConfigError(f"the ACP agent `{shlex.join(self.argv)}` did not start: "
                              f"{exc or 'no answer to initialize'}{said}") from None

    def call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def ask(self, action: Action, *, refuse: bool = True) -> ActionResult:
        """Have the engine run `action` (through the driver's next decision); its result."""
        request = _Request(action)
        self.items.put(request)
        result = await asyncio.wrap_future(request.result)
        if refuse and not result.ok:
            raise _error(result.error or f"{action.tool} failed")
        return result

    def relative(self, path: str) -> str:
        """An absolute path the agent named, relative to the workspace (outside: refused)."""
        return _relative(self.workspace, path)

    def terminal(self, terminal_id: str) -> _Terminal:
        if terminal_id not in self.terminals:
            raise _error(f"no terminal {terminal_id}")
        return self.terminals[terminal_id]

    def close(self) -> None:
        """Stop the agent's process group and the loop."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.call(self._shutdown(), 10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if self.confinement is not None:
            self.confinement.close()
        self.stderr.close()

    async def _start(self) -> None:
        from acp import PROTOCOL_VERSION, Client, connect_to_agent
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        self.confinement = _confine(self.sandbox, self.workspace, self.argv, self.env,
                                    self.visible)
        inner = self.confinement.preexec
        env = dict(self.confinement.env)
        for name, value in env.items():  # "$TMPDIR": the agent's own temp directory
            if value == TMPDIR:
                env[name] = env.get("TMPDIR") or tempfile.gettempdir()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr, cwd=self.workspace, env=env,
            start_new_session=True, preexec_fn=_dies_with_us(inner), limit=64 * 1024 * 1024)
        self.confinement.started()
        self.conn = connect_to_agent(cast(Client, _Client(self)), self.process.stdin,
                                     self.process.stdout)
        hello = await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True),
            client_info=Implementation(name="normalize", version="1"))
        capabilities = hello.agent_capabilities
        self.can_load = bool(capabilities and capabilities.load_session)

    async def _shutdown(self) -> None:
        if self.conn is not None:
            await self.conn.close()
        if self.process is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.process.wait(), 5)

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.stderr.seek(0)
            tail = self.stderr.read().decode("utf-8", "replace").strip()[-400:]
            return f"; it said: {tail}" if tail else ""
        return ""


def _confine(policy: SandboxPolicy, workspace: Path, argv: list[str], env: dict[str, str],
             visible: list[str]) -> Any:
    """The agent's sandbox: the task's own with what its launch added (its home, keys, model
    host: `env` is set, beside what the scrub lets through); fails closed where there is none."""
    abi, tier = 0, SandboxTier.NONE
    if policy.mode is not SandboxMode.OFF:
        found = probe()
        if not found.available:
            raise OSError(f"the sandbox is unavailable ({found.reason}); run with --sandbox off "
                          f"to start it unconfined")
        abi, tier = found.landlock_abi, found.tier
    return confine(policy, workspace, abi=abi, env={**os.environ, **env}, label="acp-agent",
                   tier=tier, visible=(*argv, *visible))


def _dies_with_us(inner: Any) -> Any:
    from normalize.sandbox.landlock import libc

    prctl = libc().prctl  # looked up before the fork

    def apply() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if inner is not None:
            inner()

    return apply


class AcpDriver:
    """An ACP agent decides; each file and command it asks for is a normalize action."""

    name: ClassVar[str] = "acp"
    redecides_on_resume: ClassVar[bool] = True
    takes_follow_ups: ClassVar[bool] = True  # sent as the agent's next `session/prompt`

    def __init__(self, command: list[str], *, services: DriverServices,
                 follow_ups: list[str] | None = None, base_url: str | None = None) -> None:
        if not command:
            raise ConfigError("the acp driver needs the agent's command (--harness acp:COMMAND)")
        self.command = command
        self.services = services
        self.base_url = base_url
        self.follow_ups = list(follow_ups or [])
        self.session: str | None = None
        self.sent = 0  # instructions sent: the goal, then each follow-up
        self.in_flight = False  # a prompt was sent and has not ended
        self.summary = ""
        self.link: _Link | None = None
        self.turn: concurrent.futures.Future[Any] | None = None
        self.pending: _Request | None = None
        self.said: list[str] = []  # the agent's text since it was last journaled
        self.reply = ""  # the agent's text in this prompt's turn (its summary when it ends)
        self.recap = False  # the next prompt opens a new session of a task begun earlier
        self.calls: set[str] = set()  # the agent's tool calls already journaled as started
        self.inside: dict[str, str] = {}  # its calls that may change files: id -> title

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> AcpDriver:
        own = config.get("acp") or {}
        spec = config.get("spec") or {}
        llm = {**(spec.get("llm") or {}), **(config.get("llm") or {})}
        base_url = str(own.get("base_url") or llm.get("base_url") or "") or None
        return cls([str(word) for word in own.get("command") or []], services=services,
                   follow_ups=[str(f) for f in config.get("follow_ups") or []],
                   base_url=base_url)

    def snapshot(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "session": self.session, "sent": self.sent,
                "in_flight": self.in_flight, "summary": self.summary}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("v") != STATE_VERSION:
            return
        self.session = state.get("session") or None
        self.sent = int(state.get("sent", 0))
        self.in_flight = bool(state.get("in_flight", False))
        self.summary = str(state.get("summary", ""))

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.link is None:
            self._connect(task, ctx)
        while True:
            if self.turn is None and not self._prompt(task):
                self._close()
                return Decision.finish(summary=self.summary or "done")
            item = self._next(ctx)
            if item is None:  # cancelled: the engine stops at its next safe point
                return Decision()
            if isinstance(item, _Request):
                self._journal_text(ctx, task)
                self.pending = item
                return Decision(actions=[item.action])
            self._journal_text(ctx, task, item.usage)
            self.turn, self.in_flight = None, False
            if item.error:
                said = self.link.stderr_tail() if self.link is not None else ""
                self._close()
                return Decision.finish(summary=item.error + said, status=TaskStatus.FAILED)
            self.summary = self.reply.strip() or self.summary

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del task
        if action.tool == "permit" and not result.ok:  # refused: the call changes nothing
            self.inside.pop(str(action.params.get("call")), None)
        pending, self.pending = self.pending, None
        if pending is not None and pending.action.key == action.key:
            pending.result.set_result(result)

    # -- the session and its prompts ---------------------------------------------------

    def _connect(self, task: Task, ctx: RunContext) -> None:
        """Start the agent and open its session: the last one again when it can load it."""
        sandbox = self.services.sandbox or SandboxPolicy()
        env: dict[str, str] = {}
        visible: list[str] = []
        if self.services.launch is not None:  # its home, keys, model server, as a harness's
            try:
                env, sandbox, visible = self.services.launch(sandbox, self.command,
                                                             self.base_url, None)
            except NormalizeError as exc:
                raise ConfigError(f"the ACP agent `{shlex.join(self.command)}`: {exc}") from None
        self.link = _Link(self.command, Path(task.workspace), sandbox, env=env, visible=visible)
        self.link.start()
        conn = self.link.conn
        if self.session is not None and self.link.can_load:
            try:
                self.link.call(conn.load_session(cwd=task.workspace, session_id=self.session,
                                                 mcp_servers=[]), START_TIMEOUT)
            except Exception:  # it lost that session: a new one, with a recap
                self.session = None
        if self.session is None or not self.link.can_load:
            try:
                made = self.link.call(conn.new_session(cwd=task.workspace, mcp_servers=[]),
                                      START_TIMEOUT)
            except Exception as exc:  # the agent's error, whatever its type
                said = self.link.stderr_tail()
                self._close()
                raise ConfigError(f"the ACP agent `{shlex.join(self.command)}` opened no "
                                  f"session: {exc}{said}") from None
            self.recap = self.sent > 0  # it knows nothing of the earlier prompts
            self.session = made.session_id
            ctx.emit(HarnessSession(harness="acp", session_id=made.session_id))
        if self.in_flight:  # the last process died mid-turn: say so, then go on
            self.recap = False
            self._send(INTERRUPTED.format(goal=task.goal))

    def _prompt(self, task: Task) -> bool:
        """Send the next instruction (the goal, then each follow-up); False when none is left."""
        instructions = [task.goal, *self.follow_ups]
        if self.sent >= len(instructions):
            return False
        text = instructions[self.sent]
        if self.recap:
            text, self.recap = RECAP.format(goal=task.goal, text=text), False
        self.sent += 1
        self._send(text)
        return True

    def _send(self, text: str) -> None:
        from acp import text_block

        assert self.link is not None
        self.reply = ""
        self.in_flight = True
        self.turn = self.link.submit(self.link.conn.prompt(session_id=self.session,
                                                           prompt=[text_block(text)]))

    def _next(self, ctx: RunContext) -> _Request | _Ended | None:
        """The agent's next request, or its turn's end; updates become events meanwhile."""
        assert self.link is not None and self.turn is not None
        while True:
            try:
                item = self.link.items.get(timeout=POLL)
            except queue.Empty:
                if ctx.cancel.cancelled:
                    self._cancel()
                    return None
                if self.turn.done() and self.link.items.empty():
                    return _ended(self.turn)
                continue
            if isinstance(item, _Request):
                if item.action.tool not in ("view", "permit"):  # the open calls' change is
                    self.inside.clear()  # this action's (a read or a permission changes nothing:
                    # theirs is still to record)
                return item
            record = self._update(ctx, item)
            if record is not None:
                return _Request(record)

    def _update(self, ctx: RunContext, update: Any) -> Action | None:
        """One `session/update` of the agent, as normalize's events; a `record` action when
        it ends a call that ran inside the agent and may have changed files."""
        from acp.schema import (
            AgentMessageChunk,
            AgentThoughtChunk,
            ToolCallProgress,
            ToolCallStart,
        )

        match update:
            case AgentMessageChunk() if getattr(update.content, "text", None):
                self.said.append(update.content.text)
                self.reply += update.content.text
                ctx.emit(TextDelta(text=update.content.text))
            case AgentThoughtChunk() if getattr(update.content, "text", None):
                ctx.emit(ThinkingDelta(text=update.content.text))
            case ToolCallStart() if update.tool_call_id not in self.calls:
                # Claude Code's agents start each call twice (streamed, then whole): once
                # as a call, the second kept whole as a `harness_event`
                self.calls.add(update.tool_call_id)
                if update.kind not in UNCHANGING:
                    self.inside[update.tool_call_id] = update.title
                ctx.emit(HarnessToolCalled(harness="acp", call_id=update.tool_call_id,
                                           tool=update.title,
                                           input=_plain(update.raw_input)))
            case ToolCallProgress() if update.status in ("completed", "failed"):
                ctx.emit(HarnessToolFinished(harness="acp", call_id=update.tool_call_id,
                                             ok=update.status == "completed",
                                             output=_output(update)))
                return self._record(update.tool_call_id)
            case _:
                ctx.emit(HarnessEvent(harness="acp", kind=str(getattr(update, "session_update",
                                                                      "update")),
                                      data=update.model_dump(mode="json", by_alias=True,
                                                             exclude_none=True)))
        return None

    def _record(self, call_id: str) -> Action | None:
        """The `record` action for a call that ran inside the agent (None: it asked the client
        for what it did, or it changes no file)."""
        title = self.inside.pop(call_id, None)
        if title is None:
            return None
        if self.link is not None:  # its paths as the workspace's
            title = title.replace(f"{self.link.workspace}{os.sep}", "")
        shown = " ".join(title.split())[:120]
        return Action("record", {"args": [call_id], "title": f"the agent's {shown}"},
                      text=f"record {call_id}: {shown}")

    def _journal_text(self, ctx: RunContext, task: Task, usage: Usage | None = None) -> None:
        """What the agent said since the last action, kept in the journal (deltas are not),
        with the tokens of its prompt's turn when it ended and said them (they count in the
        task's usage; the agent names no price, so its cost stays unknown)."""
        if self.said or usage is not None:
            used = usage or Usage()
            if usage is not None:
                task.usage.add(usage)
            ctx.emit(ModelReplied(turn=task.turn, model="acp", text="".join(self.said),
                                  input_tokens=used.input_tokens,
                                  output_tokens=used.output_tokens,
                                  cache_read_tokens=used.cache_read_tokens,
                                  cache_write_tokens=used.cache_write_tokens))
            self.said = []

    def _cancel(self) -> None:
        if self.link is not None and self.session is not None:
            with contextlib.suppress(Exception):
                self.link.call(self.link.conn.cancel(session_id=self.session), 5)
        self._close()

    def _close(self) -> None:
        if self.pending is not None:
            self.pending.result.cancel()
            self.pending = None
        if self.link is not None:
            self.link.close()
            self.link = None
        self.turn = None


def _ended(turn: concurrent.futures.Future[Any]) -> _Ended:
    error = turn.exception()
    if error is not None:
        return _Ended(error=f"the ACP agent's turn failed: {error}")
    answer = turn.result()
    used = getattr(answer, "usage", None)
    usage = None if used is None else Usage(
        input_tokens=used.input_tokens, output_tokens=used.output_tokens,
        cache_read_tokens=used.cached_read_tokens or 0,
        cache_write_tokens=used.cached_write_tokens or 0)
    return _Ended(stop_reason=str(answer.stop_reason), usage=usage)


def _output(update: Any) -> str:
    """What a tool call's last update says it gave: its raw output, else its text content."""
    if update.raw_output is not None:
        return str(_plain(update.raw_output))
    texts = [getattr(getattr(c, "content", None), "text", None) for c in update.content or []]
    return "\n".join(t for t in texts if t)


def _plain(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {} if value is None else {"value": value}

