"""Codex CLI as a harness: `codex exec --json`, and `codex exec resume SESSION` to continue.

Its stream is one JSON object a line: `thread.started` names the session;
`item.started` / `item.completed` carry its items (an agent message, its
reasoning, a command it ran, a file change, an MCP tool call); `turn.completed`
has the turn's usage (`turn.failed` and `error` say what went wrong). Any other
kind is kept whole. Codex reports no cost: normalize prices its tokens.

Its own sandbox is turned off (`danger-full-access`) and approvals never asked
for: normalize's sandbox contains the process and all it starts. Its home
(`CODEX_HOME`) is the task's harness home, with the model provider pointed at
the base URL given (the Responses API).
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
from normalize.tools.harness.base import TurnReader, TurnRequest, clip

PROVIDER = "normalize"
TOOL_ITEMS = {"command_execution": "command", "file_change": "changes",
              "mcp_tool_call": "tool", "web_search": "query"}
RETRYABLE = ("429", "500", "502", "503", "overloaded", "rate limit", "stream disconnected")


class CodexHarness:
    """Codex CLI (npm `@openai/codex`)."""

    name: ClassVar[str] = "codex"
    program: ClassVar[str] = "codex"
    key_variables: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    tested_version: ClassVar[str] = "0.171.0"
    minimum_version: ClassVar[tuple[int, ...]] = (0, 50)
    reads_files: ClassVar[bool] = True

    def argv(self, program: str, request: TurnRequest) -> list[str]:
        argv = [program, "exec"]
        if request.session:
            argv += ["resume", request.session]
        argv += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if request.model:
            argv += ["--model", request.model]
        return [*argv, request.prompt]

    def visible(self, request: TurnRequest) -> list[str]:  # noqa: ARG002
        return []

    def env(self, request: TurnRequest) -> dict[str, str]:
        return {"CODEX_HOME": str(request.home), "HOME": str(request.home),
                "NO_COLOR": "1", "RUST_LOG": "error"}

    def prepare(self, request: TurnRequest) -> None:
        lines = ["# written by normalize before each turn", 'approval_policy = "never"',
                 'sandbox_mode = "danger-full-access"']
        if request.context:  # the memory and the skills catalog, as its developer message
            lines.append(f"developer_instructions = {json.dumps(request.context)}")
        lines += ["[analytics]", "enabled = false",
                  # its own skill discovery off (`.agents/skills` of a workspace nobody trusted
                  # would brief it): the skills a run may use come in normalize's catalog
                  "[skills]", "include_instructions = false",
                  "[features]", "skill_search = false"]
        if request.base_url:
            table = {"name": "normalize", "base_url": request.base_url,
                     "env_key": "OPENAI_API_KEY", "wire_api": "responses"}
            lines = [f'model_provider = "{PROVIDER}"', *lines,
                     f"[model_providers.{PROVIDER}]",
                     *(f"{k} = {json.dumps(v)}" for k, v in table.items())]
        (request.home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def reader(self) -> TurnReader:
        return CodexReader(self.name)


class CodexReader(TurnReader):
    """Reads `codex exec --json`."""

    def read(self, obj: dict[str, Any]) -> list[Event]:
        kind = str(obj.get("type", ""))
        if kind == "thread.started":
            self.session = str(obj.get("thread_id") or "") or self.session
            return [HarnessSession(harness=self.harness, session_id=self.session or "")]
        if kind in ("item.started", "item.completed"):
            return self._item(kind, obj.get("item") or {}, obj)
        if kind == "turn.completed":
            self._usage(obj.get("usage") or {})
            return []
        if kind in ("turn.failed", "error"):
            error = obj.get("error") if kind == "turn.failed" else obj
            message = str((error or {}).get("message") or kind)
            self.error = message
            self.retryable = any(mark in message.lower() for mark in RETRYABLE)
            return []
        if kind in ("turn.started", "item.updated"):
            return []
        return [self.kept(kind, obj)]

    def _item(self, kind: str, item: dict[str, Any], obj: dict[str, Any]) -> list[Event]:
        what = str(item.get("type", ""))
        ident = str(item.get("id", ""))
        done = kind == "item.completed"
        if what in TOOL_ITEMS:
            if not done:
                return [HarnessToolCalled(harness=self.harness, call_id=ident, tool=what,
                                          input={TOOL_ITEMS[what]: item.get(TOOL_ITEMS[what])})]
            output = item.get("aggregated_output") or item.get("result") or \
                item.get("changes") or ""
            ok = item.get("status") in (None, "completed") and item.get("exit_code") in (None, 0)
            shown = output if isinstance(output, str) else json.dumps(output)
            return [HarnessToolFinished(harness=self.harness, call_id=ident, ok=bool(ok),
                                        output=clip(shown))]
        if not done:
            return []
        if what == "agent_message":
            self.result = str(item.get("text", ""))
            return [TextDelta(text=self.result)]
        if what == "reasoning":
            return [ThinkingDelta(text=str(item.get("text", "")))]
        if what == "error":
            return [self.kept("item/error", obj)]
        return [self.kept(f"item/{what}", obj)]

    def _usage(self, usage: dict[str, Any]) -> None:
        cached = int(usage.get("cached_input_tokens") or 0)
        self.usage.input_tokens += int(usage.get("input_tokens") or 0) - cached
        self.usage.cache_read_tokens += cached
        self.usage.output_tokens += int(usage.get("output_tokens") or 0)
        self.usage.requests += 1
