"""aider as a harness: `aider --message PROMPT --yes-always`, git off (normalize checkpoints).

aider prints plain text, not JSON: each line is streamed as text, and its
`Tokens: … Cost: $… message` line gives the turn's usage and cost. Its chat
history lives in the task's harness home and is restored on the next turn,
which is its session. It talks to an OpenAI-compatible server
(`--openai-api-base`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from normalize.events import Event, HarnessSession, TextDelta
from normalize.tools.harness.base import CONTEXT_FILE, TurnReader, TurnRequest, write_context

SESSION = "chat-history"
_TOKENS = re.compile(r"Tokens:\s*([\d.]+)(k?)\s+sent,\s*([\d.]+)(k?)\s+received"
                     r"(?:.*?Cost:\s*\$([\d.]+)\s+message)?", re.IGNORECASE)


def _count(number: str, kilo: str) -> int:
    return int(float(number) * (1000 if kilo else 1))


class AiderHarness:
    """aider (PyPI `aider-chat`, in a virtualenv of its own)."""

    name: ClassVar[str] = "aider"
    program: ClassVar[str] = "aider"
    key_variables: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    tested_version: ClassVar[str] = "0.86.1"
    minimum_version: ClassVar[tuple[int, ...]] = (0, 80)
    reads_files: ClassVar[bool] = False  # it edits the files it is given; it reads no others

    def argv(self, program: str, request: TurnRequest) -> list[str]:
        home = request.home
        argv = [program, "--message", request.prompt, "--yes-always", "--no-git",
                "--no-auto-commits", "--no-pretty", "--no-check-update",
                "--no-show-model-warnings", "--analytics-disable", "--no-show-release-notes",
                "--chat-history-file", str(home / "chat.history"),
                "--input-history-file", str(home / "input.txt"),
                "--llm-history-file", str(home / "llm.txt")]
        if request.session:
            argv.append("--restore-chat-history")
        if request.model:
            argv += ["--model", f"openai/{request.model.removeprefix('openai/')}"]
        if request.base_url:
            argv += ["--openai-api-base", request.base_url]
        if request.context:  # the memory and named skills: a read-only file in its chat
            argv += ["--read", str(home / CONTEXT_FILE)]
        return argv

    def visible(self, request: TurnRequest) -> list[str]:  # noqa: ARG002
        return []

    def env(self, request: TurnRequest) -> dict[str, str]:
        return {"HOME": str(request.home), "AIDER_CHECK_UPDATE": "false", "NO_COLOR": "1",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no price list from the internet

    def prepare(self, request: TurnRequest) -> None:
        """aider keeps everything in the files its flags name; the context is one of them."""
        write_context(request)

    def reader(self) -> TurnReader:
        return AiderReader(self.name)


class AiderReader(TurnReader):
    """Reads aider's plain output: text lines, and the tokens-and-cost line."""

    def plain(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self.session is None:
            self.session = SESSION
            events.append(HarnessSession(harness=self.harness, session_id=SESSION))
        found = _TOKENS.search(text)
        if found:
            self.usage.input_tokens += _count(found.group(1), found.group(2))
            self.usage.output_tokens += _count(found.group(3), found.group(4))
            self.usage.cost_usd += float(found.group(5) or 0.0)
            self.usage.requests += 1
            return events
        super().plain(text)
        self.result = "\n".join(self.unparsed[-20:])
        return [*events, TextDelta(text=text + "\n")]

    def read(self, obj: dict[str, Any]) -> list[Event]:
        return self.plain(str(obj))
