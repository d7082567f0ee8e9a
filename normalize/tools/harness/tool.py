"""The `harness` tool: one turn of another agent's CLI, run as a program in normalize's sandbox.

The harness process and everything it starts run under the task's sandbox
(workspace writes, `.git` read-only), with two additions only: its own home
(sessions, settings) is writable and kept between turns, and the model API's
host joins the host allow-list (the only host it reaches, through normalize's
proxy). Its output is read line by line as it comes: each line becomes
normalize events (text, reasoning, each of its tool calls and their results,
its session), emitted at once; the turn's usage and cost end it as a
`model_replied`. A stop (Ctrl-C) interrupts it as any program; a turn whose
cost passes the budget it was given is stopped the same way, cleanly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from normalize.cancel import CancelToken
from normalize.errors import ToolError
from normalize.events import (
    Event,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    ModelReplied,
    Notice,
)
from normalize.programs import trusted_program
from normalize.sandbox import SandboxPolicy
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.approval import outside_reason
from normalize.tools.base import ToolContext
from normalize.tools.harness.base import Harness, TurnReader, TurnRequest
from normalize.tools.harness.context import turn_context
from normalize.tools.harness.registry import DEFAULT_HOSTS, harness_named
from normalize.tools.run import ProcessOutcome, run_process

__all__ = ["HarnessTool", "find_program", "harness_home"]

SESSION_FILE = ".normalize-session"
"""In the harness's home: the last session it named (a crash may come before the result)."""
STDERR_LINES = 8
TURN_TIMEOUT = 3600.0
"""A harness turn is a whole agent session: an hour, unless its step sets a `timeout`."""
SILENT_AFTER = 15.0
"""Seconds without an event from the harness before the turn says it is waiting (then a minute
between reminders)."""
SILENT_AGAIN = 60.0


def find_program(harness: Harness, workspace: Path | None = None) -> str:
    """The harness's executable: `NORMALIZE_<NAME>_BIN`, else found by normalize's trusted
    rule (`normalize.programs`: never in the workspace, the data home or the current
    directory, where the model could have put one); `ToolError` when absent."""
    override = os.environ.get(f"NORMALIZE_{harness.name.upper()}_BIN")
    found = override if override and os.access(override, os.X_OK) else \
        trusted_program(harness.program, () if workspace is None else (workspace,))
    if not found:
        raise ToolError(f"{harness.name} is not installed: `{harness.program}` is not on PATH "
                        f"outside the workspace (normalize is tested with {harness.name} "
                        f"{harness.tested_version}; see docs/harnesses.md)")
    return found


def installed(program: str) -> str:
    """Where the harness is installed: its npm `node_modules` or its Python virtualenv (its
    dependencies beside it), or the directory of its real executable; kept visible where the
    sandbox empties /tmp."""
    real = Path(os.path.realpath(program))
    for parent in real.parents:
        if parent.name == "node_modules":
            return str(parent)
    if (real.parent.parent / "pyvenv.cfg").is_file():  # bin/aider of a venv: its lib/ too
        return str(real.parent.parent)
    return str(real.parent)


def harness_home(ctx: ToolContext, name: str) -> Path:
    """The harness's own home for this task, made on first use."""
    if ctx.state_dir is None:
        raise ToolError(f"{name}: this run has no state directory for the harness's sessions")
    home = ctx.state_dir / name
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def model_host(base_url: str | None, name: str) -> str:
    """The host of the model API the harness talks to."""
    if base_url:
        host = urlsplit(base_url).hostname
        if not host:
            raise ToolError(f"{name}: the base URL {base_url!r} names no host")
        return host
    return DEFAULT_HOSTS[name]


def turn_policy(policy: SandboxPolicy, harness: Harness, home: Path, host: str,
                env: dict[str, str]) -> SandboxPolicy:
    """The task's sandbox plus the harness's home (writable), its keys, the variables normalize
    sets for it (`env`: its model server, its home) and the model host."""
    hosts = policy.hosts if policy.network or host in policy.hosts else (*policy.hosts, host)
    return replace(policy, writable=(*policy.writable, str(home)), hosts=hosts,
                   env_allow=(*policy.env_allow, *harness.key_variables, *env))


class _Stream:
    """Splits the output into lines, reads each, emits its events, watches the budget."""

    def __init__(self, reader: TurnReader, emit: Callable[[Event], object],
                 home: Path, budget: float | None, prices: dict[str, float],
                 stop: CancelToken, waiting: str = "") -> None:
        self.reader, self.emit, self.home = reader, emit, home
        self.budget, self.prices, self.stop = budget, prices, stop
        self.pending = b""
        self.over_budget = False
        self.waiting = waiting  # who it waits on, for the line a long silence gets
        self.heard = time.monotonic()  # when the harness last said something shown
        self.next_word = self.heard + SILENT_AFTER
        self.running: HarnessToolCalled | None = None  # its own tool call under way, if any

    def __call__(self, chunk: bytes) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self.line(line.decode("utf-8", "replace"))
        self._watch_silence()

    def line(self, text: str) -> None:
        for event in self.reader.feed(text):
            if isinstance(event, HarnessSession) and event.session_id:
                (self.home / SESSION_FILE).write_text(event.session_id, encoding="utf-8")
            self.emit(event)
            self.heard = time.monotonic()
            self.next_word = self.heard + SILENT_AFTER
            if isinstance(event, HarnessToolCalled):
                self.running = event
            elif isinstance(event, HarnessToolFinished):
                self.running = None
        self._watch_budget()

    def _watch_silence(self) -> None:
        """Say so when the harness has shown nothing for a while (its model server may be
        unreachable, or slow), with the last line it printed that normalize could not read."""
        now = time.monotonic()
        if now < self.next_word:
            return
        self.next_word = now + SILENT_AGAIN
        quiet = now - self.heard
        if self.running is not None:  # its own command is working, not the model server
            call = self.running
            self.emit(Notice(level="info", message=(
                f"{call.harness}'s {call.tool} call has run for {quiet:.0f} s: "
                f"{json.dumps(call.input, ensure_ascii=False)[:120]}")))
            return
        last = self.reader.unparsed[-1][:200] if self.reader.unparsed else ""
        self.emit(Notice(level="warning", message=self.waiting.format(quiet) + (
            f"; its last line: {last}" if last else "")))

    def close(self) -> None:
        if self.pending:
            self.line(self.pending.decode("utf-8", "replace"))
            self.pending = b""

    def cost(self) -> float:
        usage = self.reader.usage
        return usage.cost_usd or usage.priced(self.prices)

    def _watch_budget(self) -> None:
        if self.budget is not None and not self.over_budget and self.cost() >= self.budget:
            self.over_budget = True
            self.stop.cancel("the budget is spent")


class HarnessTool:
    """`harness NAME`: one turn of another agent (params: prompt, session, model, ...)."""

    name: ClassVar[str] = "harness"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "runs one turn of another agent's CLI in the sandbox"
    previewed: ClassVar[bool] = False

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        params = action.params
        harness = harness_named(str(params.get("harness", "")))
        program = find_program(harness, ctx.workspace)
        home = harness_home(ctx, harness.name)
        request = replace(self._request(params, home), permissions=_policy_table(ctx))
        if params.get("context"):
            text, left_out = turn_context(params["context"], home, harness.reads_files,
                                          ctx.recall)
            request = replace(request, context=text)
            for line in left_out:
                (ctx.emit or _discard)(Notice(level="warning", message=line))
        harness.prepare(request)
        env = harness.env(request)  # its keys pass the scrub even with --sandbox off
        policy = turn_policy(ctx.sandbox, harness, home,
                             model_host(request.base_url, harness.name), env)
        emit = ctx.emit or _discard
        stop = CancelToken()
        forward = ctx.cancel.on_cancel(lambda: stop.cancel(ctx.cancel.reason or "interrupted"))
        if ctx.cancel.cancelled:
            stop.cancel(ctx.cancel.reason or "interrupted")
        reader = harness.reader()
        reader.model = request.model or ""  # until the harness names the one it uses
        stream = _Stream(reader, lambda e: emit(e, durable=_durable(e)), home,
                         request.budget_usd, dict(params.get("prices") or {}), stop,
                         waiting=_waiting(harness.name, request.base_url))
        try:
            outcome = run_process(
                harness.argv(program, request), cwd=ctx.workspace,
                timeout=float(params.get("timeout") or max(ctx.timeout, TURN_TIMEOUT)),
                cancel=stop,
                # no write tracer: a harness's runtime (Bun, Node) may write through io_uring,
                # which it cannot see; the checkpoint counts every change of the turn instead
                env={**os.environ, **env}, on_spawn=ctx.on_spawn,
                on_output=stream, sandbox=policy,
                workspace=ctx.workspace, label=ctx.task_id,
                visible=[installed(program), *harness.visible(request)])
        finally:
            forward()
            stream.close()
        return self._result(harness, stream, outcome, int(params.get("turn") or 0), emit,
                            cancelled=ctx.cancel.cancelled)

    def _request(self, params: dict[str, Any], home: Path) -> TurnRequest:
        session = params.get("session")
        if params.get("continue_last") and not session:
            recorded = home / SESSION_FILE
            session = recorded.read_text(encoding="utf-8").strip() if recorded.exists() else None
        budget = params.get("budget_usd")
        return TurnRequest(prompt=str(params.get("prompt", "")), home=home,
                           session=str(session) if session else None,
                           model=params.get("model") or None,
                           base_url=params.get("base_url") or None,
                           budget_usd=float(budget) if budget is not None else None,
                           new_session=params.get("new_session") or None)

    def _result(self, harness: Harness, stream: _Stream, outcome: ProcessOutcome, turn: int,
                emit: Any, *, cancelled: bool) -> ActionResult:
        reader = stream.reader
        usage = reader.usage
        usage.cost_usd = stream.cost()
        if usage.requests or reader.result:
            emit(ModelReplied(turn=turn, model=f"{harness.name}:{reader.model or 'default'}",
                              text=reader.result, input_tokens=usage.input_tokens,
                              output_tokens=usage.output_tokens,
                              cache_read_tokens=usage.cache_read_tokens,
                              cache_write_tokens=usage.cache_write_tokens,
                              cost_usd=round(usage.cost_usd, 8)), durable=True)
        data: dict[str, Any] = {"harness": harness.name, "session": reader.session,
                                "usage": asdict(usage), "exit_code": outcome.exit_code}
        if outcome.network:
            data["network"] = outcome.network
        result = ActionResult(ResultStatus.SUCCESS, output=reader.result,
                              duration=outcome.duration, exit_code=outcome.exit_code, data=data)
        if stream.over_budget or reader.stopped == "budget":
            data["stopped"] = "budget"
            emit(Notice(level="warning", message=(
                f"{harness.name} was stopped: its turn reached the budget "
                f"(${usage.cost_usd:.4f} of ${stream.budget or 0:.4f} left)")))
            return result
        if cancelled or outcome.cancelled:
            result.status, result.error = ResultStatus.CANCELLED, "interrupted"
            return result
        problem = self._problem(harness, reader, outcome)
        if problem is not None:
            result.status, result.error = ResultStatus.ERROR, problem
            data["retryable"] = reader.retryable
        return result

    def _problem(self, harness: Harness, reader: TurnReader,
                 outcome: ProcessOutcome) -> str | None:
        """Why the turn failed, naming the harness, with its last lines (None: it did not)."""
        tail = " | ".join(reader.unparsed[-STDERR_LINES:])
        said = f"; it said: {tail}" if tail else ""
        if reader.error:
            return f"{harness.name}: {reader.error}"
        if outcome.timed_out:
            return f"{harness.name} timed out{said}"
        if not outcome.ok:
            how = outcome.failure(0) or "failed"
            return f"{harness.name} stopped mid-turn ({how}){said}"
        if not reader.session and not reader.result and reader.unparsed:
            return (f"{harness.name} printed nothing normalize can read (is it the tested "
                    f"version {harness.tested_version}?){said}")
        return None


def _policy_table(ctx: ToolContext) -> dict[str, Any]:
    """The task's approval policy as a `[workflow.permissions]` table (for the harness)."""
    policy = ctx.policy
    return {"mode": policy.mode.value, "allow": list(policy.allow), "deny": list(policy.deny),
            "allow_shell": policy.allow_shell, "outside": outside_reason(ctx.sandbox)}


def _waiting(name: str, base_url: str | None) -> str:
    """The silence notice's words (`{}`: the seconds), naming the model server it waits on."""
    server = base_url or f"https://{DEFAULT_HOSTS[name]}, its default (--base-url names another)"
    return f"{name} has said nothing for {{:.0f}} s; its model server: {server}"


def _discard(event: Event, *, durable: bool = False) -> Event:  # noqa: ARG001
    """Where events go when no one listens (the tool run on its own)."""
    return event


def _durable(event: Event) -> bool:
    return isinstance(event, HarnessSession)
