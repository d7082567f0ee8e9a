"""Claude Code as a harness: `claude -p --output-format stream-json --verbose`.

Its stream is one JSON object a line: `system`/`init` names the session;
`assistant` messages carry text, thinking and `tool_use` blocks (with the
message's usage); `user` messages carry each `tool_result`; `result` ends the
turn with its total usage, cost and outcome. Any other kind is kept whole.

Its permission prompts are answered by normalize's approval policy: an MCP server
of normalize's (`normalize.tools.harness.permit`) is its `--permission-prompt-tool`,
so a command the task's policy refuses is refused to Claude Code too (this also
works as root, where `--dangerously-skip-permissions` is refused). normalize's
sandbox is what bounds every command it runs either way.

Its own skills are off (`--disable-slash-commands`): it would list a workspace's
`.claude/skills` whether or not anyone trusted them. The skills a run may use
reach it through normalize's catalog instead (`normalize.tools.harness.context`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from normalize.events import (
    Event,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    TextDelta,
    ThinkingDelta,
)
from normalize.tools.harness.base import (
    CONTEXT_FILE,
    TurnReader,
    TurnRequest,
    clip,
    content_text,
    write_context,
)
from normalize.tools.harness.permit import READING, import_roots, server
from normalize.tools.harness.permit import TOOL as PERMIT_TOOL

ALLOWED_TOOLS = ("Bash", "Read", "Edit", "Write", "MultiEdit", "Glob", "Grep", "LS",
                 "NotebookEdit", "TodoWrite")
"""Claude Code's own tools a turn may use without asking (normalize's sandbox bounds them)."""

QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}
"""No update checks, telemetry or error reports: the model API is its only traffic."""

RETRYABLE = ("overloaded", "rate_limit", "529", "503", "502", "timeout", "ECONNRESET")


class ClaudeHarness:
    """Claude Code (npm `@anthropic-ai/claude-code`)."""

    name: ClassVar[str] = "claude"
    program: ClassVar[str] = "claude"
    key_variables: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    tested_version: ClassVar[str] = "2.1.332"
    minimum_version: ClassVar[tuple[int, ...]] = (2, 0)
    reads_files: ClassVar[bool] = True

    def argv(self, program: str, request: TurnRequest) -> list[str]:
        argv = [program, "-p", request.prompt, "--output-format", "stream-json", "--verbose",
                *self._permissions(request), "--strict-mcp-config",
                "--disable-slash-commands"]  # its own skills would skip normalize's trust check
        if request.session:
            argv += ["--resume", request.session]
        elif request.new_session:
            argv += ["--session-id", request.new_session]
        if request.model:
            argv += ["--model", request.model]
        if request.budget_usd is not None:
            argv += ["--max-budget-usd", f"{max(request.budget_usd, 0.0):.6f}"]
        if request.context:  # each turn's own (not recorded in its session for the next)
            argv += ["--append-system-prompt-file", str(request.home / CONTEXT_FILE),
                     "--system-prompt-snapshot", "off"]
        return argv

    def _permissions(self, request: TurnRequest) -> list[str]:
        """Its permission prompts answered by normalize's policy (over MCP), or, without one,
        its own tools allowed by name."""
        if request.permissions is None:
            return ["--permission-mode", "acceptEdits", "--allowedTools", ",".join(ALLOWED_TOOLS)]
        mcp = {"mcpServers": {"normalize": server(request.permissions)}}
        return ["--permission-prompt-tool", f"mcp__normalize__{PERMIT_TOOL}",
                "--mcp-config", json.dumps(mcp),
                "--allowedTools", ",".join(sorted(READING))]

    def visible(self, request: TurnRequest) -> list[str]:
        """normalize's own package and the server's others, for the permission server it
        starts."""
        return import_roots() if request.permissions is not None else []

    def env(self, request: TurnRequest) -> dict[str, str]:
        env = {**QUIET, "HOME": str(request.home),
               "CLAUDE_CONFIG_DIR": str(request.home / ".claude")}
        if request.base_url:
            env["ANTHROPIC_BASE_URL"] = request.base_url
        return env

    def prepare(self, request: TurnRequest) -> None:
        (request.home / ".claude").mkdir(parents=True, exist_ok=True)
        write_context(request)

    def reader(self) -> TurnReader:
        return ClaudeReader(self.name)


class ClaudeReader(TurnReader):
    """Reads Claude Code's stream-json."""

    def read(self, obj: dict[str, Any]) -> list[Event]:
        kind = str(obj.get("type", ""))
        if kind == "system" and obj.get("subtype") == "init":
            return self._init(obj)
        if kind == "assistant":
            return self._assistant(obj.get("message") or {})
        if kind == "user":
            return self._tool_results(obj.get("message") or {})
        if kind == "result":
            self._result(obj)
            return []
        return [self.kept(kind if "subtype" not in obj else f"{kind}/{obj['subtype']}", obj)]

    def _init(self, obj: dict[str, Any]) -> list[Event]:
        self.session = str(obj.get("session_id") or "") or self.session
        self.model = str(obj.get("model") or "")
        return [HarnessSession(harness=self.harness, session_id=self.session or "")]

    def _assistant(self, message: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        for block in message.get("content") or []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                events.append(TextDelta(text=str(block.get("text", ""))))
            elif kind == "thinking":
                events.append(ThinkingDelta(text=str(block.get("thinking", ""))))
            elif kind == "tool_use":
                events.append(HarnessToolCalled(
                    harness=self.harness, call_id=str(block.get("id", "")),
                    tool=str(block.get("name", "")), input=dict(block.get("input") or {})))
        usage = message.get("usage") or {}
        if not self.final_usage and message.get("id") and usage:
            self._add_usage(usage)
        return events

    def _add_usage(self, usage: dict[str, Any]) -> None:
        self.usage.input_tokens += int(usage.get("input_tokens") or 0)
        self.usage.output_tokens += int(usage.get("output_tokens") or 0)
        self.usage.cache_read_tokens += int(usage.get("cache_read_input_tokens") or 0)
        self.usage.cache_write_tokens += int(usage.get("cache_creation_input_tokens") or 0)
        self.usage.requests += 1

    def _tool_results(self, message: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                events.append(HarnessToolFinished(
                    harness=self.harness, call_id=str(block.get("tool_use_id", "")),
                    ok=not block.get("is_error"),
                    output=clip(content_text(block.get("content")))))
        return events

    def _result(self, obj: dict[str, Any]) -> None:
        self.session = str(obj.get("session_id") or "") or self.session
        self.result = str(obj.get("result") or "")
        usage = obj.get("usage") or {}
        requests = self.usage.requests
        self.usage = type(self.usage)()
        self._add_usage(usage)
        self.usage.requests = max(requests, int(obj.get("num_turns") or 1))
        self.usage.cost_usd = float(obj.get("total_cost_usd") or 0.0)
        self.final_usage = True
        subtype = str(obj.get("subtype", "success"))
        if "budget" in subtype:  # its own --max-budget-usd: a limit, not a failure
            self.stopped = "budget"
        elif obj.get("is_error") or subtype != "success":
            self.error = self.result or str(obj.get("terminal_reason") or subtype or "error")
            self.retryable = any(mark in self.error for mark in RETRYABLE)
