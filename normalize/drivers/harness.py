"""Harness drivers: another agent (Claude Code, Codex, aider) takes each turn of a task.

Each turn is one `harness` action: the engine runs it like any side effect
(journaled as started and finished, checkpointed after, under the sandbox),
and the tool streams the harness's own events as it works. The driver keeps
the harness's session id, so the next turn, a resume after an interruption or
a crash, or a follow-up continues the harness's own conversation. It hands
the turn the budget left and the model's prices, so the tool can stop a turn
that spends it.

Config it reads (any driver's task config, so `resume --driver claude` works
on a task another driver started): `harness.model` and `harness.base_url`
(set by `resume --driver NAME --model/--base-url`), else `llm.model` and `llm.base_url` when
`llm.provider` is the harness's API (anthropic for claude, openai for codex
and aider), else `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` from the
environment; a workflow step's `goal`; and `follow_ups`.

Memory and skills, as a model's driver gets them (`remembers`): each turn's
action carries `context`, what normalize adds to the harness's system prompt
(`normalize.tools.harness.context` makes the text): the guarded memory message
retrieved by the task's input (the tool asks the run's memory for it), and the
skills catalog, capped at its share of
the harness model's window, each skill named by the file the harness reads to
load it; `$NAME` in the goal or a follow-up names a skill to read first. A
successful run consolidates memory like an agent run (the engine asks).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, LineQueue, RunContext
from normalize.events import InputReceived, Notice
from normalize.skills.catalog import Catalog, catalog_cap
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus, Usage

STATE_VERSION = 1
RETRIES = 2
"""Turns a harness gets again after a retryable failure (overloaded, rate-limited)."""
PROVIDERS = {"claude": "anthropic", "codex": "openai", "aider": "openai"}
BASE_URLS = {"claude": "ANTHROPIC_BASE_URL", "codex": "OPENAI_BASE_URL",
             "aider": "OPENAI_BASE_URL"}
"""Where a harness's model server is named when the task's llm table is for another API."""
DEFAULT_MODELS = {"claude": "claude", "codex": "gpt-5", "aider": ""}
"""What each harness runs when no model is named (for the catalog's share of its window)."""
SKILLS_MARK = "\u27e8skills\u27e9"
"""Where the catalog's files are, until the harness tool puts the copies in its home."""
SKILL_REF_RE = re.compile(r"(?<![\w$])\$([a-z0-9][a-z0-9-]{0,63})\b")
CONTINUE = ("Your previous turn on this task was interrupted before it finished. Check what "
            "was done and continue with the task:\n\n{goal}")


class HarnessDriver:
    """A harness decides and acts for the whole turn; see the module docstring."""

    name: ClassVar[str] = "harness"
    harness: ClassVar[str] = ""
    redecides_on_resume: ClassVar[bool] = True
    model_settings: ClassVar[str] = "harness"  # its own model server (`resume --driver claude -m`)
    takes_follow_ups: ClassVar[bool] = True
    remembers: ClassVar[bool] = True  # memory and skills ride its system prompt (see above)

    def __init__(self, *, model: str | None = None, base_url: str | None = None,
                 follow_ups: list[str] | None = None, inbox: LineQueue | None = None,
                 goal: str | None = None, recall: Callable[[str], str] | None = None,
                 skills: Catalog | None = None) -> None:
        self.model, self.base_url, self.goal = model, base_url, goal
        self.recall, self.skills = recall, skills
        self.follow_ups = list(follow_ups or [])
        self.inbox = inbox
        self.session: str | None = None
        self.new_session: str | None = None
        self.follow_ups_seen = 0
        self.turns = 0
        self.ended: dict[str, Any] | None = None  # how the last turn ended
        self.interrupted = False
        self.handed = ""  # what the driver before it did (`adopt`), for the first prompt
        self.retries = 0  # turns given again after a retryable failure (at most RETRIES)
        self.retrying = ""

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> HarnessDriver:
        spec = config.get("spec") or {}
        llm = {**(spec.get("llm") or {}), **(config.get("llm") or {})}
        same_api = str(llm.get("provider", "anthropic")) == PROVIDERS.get(cls.harness)
        own = config.get("harness") or {}  # `resume --driver claude --base-url URL`
        model = str(own.get("model") or (llm.get("model") if same_api else "") or "")
        base_url = str(own.get("base_url") or (llm.get("base_url") if same_api else "") or "")
        goal = config.get("goal")  # a workflow step's (the agent's goal is the task's)
        return cls(model=model.split(":", 1)[-1] or None,
                   base_url=base_url or os.environ.get(BASE_URLS[cls.harness]) or None,
                   follow_ups=[str(f) for f in config.get("follow_ups") or []],
                   inbox=services.inbox, goal=str(goal) if goal else None,
                   recall=services.recall, skills=services.skills)

    def snapshot(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "session": self.session, "new_session": self.new_session,
                "follow_ups_seen": self.follow_ups_seen, "turns": self.turns,
                "ended": self.ended, "interrupted": self.interrupted,
                "retries": self.retries, "retrying": self.retrying}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("v") != STATE_VERSION:
            return
        self.session = state.get("session") or None
        self.new_session = state.get("new_session") or None
        self.follow_ups_seen = int(state.get("follow_ups_seen", 0))
        self.turns = int(state.get("turns", 0))
        self.ended = state.get("ended")
        self.interrupted = bool(state.get("interrupted", False))
        self.retries = int(state.get("retries", 0))
        self.retrying = str(state.get("retrying", ""))

    def adopt(self, history: list[dict[str, Any]]) -> None:
        """Taking a task over from another driver: its last actions open the first prompt."""
        lines = [f"- `{h.get('command') or h.get('tool')}`: {h.get('status')}"
                 f"{': ' + str(h['error']) if h.get('error') else ''}" for h in history[-10:]]
        if lines:
            self.handed = ("Another agent worked on this task before you. Its last actions "
                           "were:\n" + "\n".join(lines) + "\n\nCheck the workspace and "
                           "finish the task:\n\n")

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        instruction = self._instruction(task, ctx)
        if instruction is None:
            return self._finish()
        self.ended = None
        return Decision(actions=[self._action(task, instruction)])

    def _instruction(self, task: Task, ctx: RunContext) -> str | None:
        """What the harness is told this turn, or None when the task is over."""
        typed = self.inbox.drain() if self.inbox is not None else []
        for line in typed:
            ctx.emit(InputReceived(kind="typed", answer=line))
        fresh = self.follow_ups[self.follow_ups_seen:]
        for text in fresh:
            ctx.emit(InputReceived(kind="follow_up", answer=text))
        self.follow_ups_seen = len(self.follow_ups)
        if fresh or typed:
            return "\n\n".join([*fresh, *typed])
        if self.interrupted:
            if self.retrying:
                ctx.emit(Notice(level="warning", message=(
                    f"{self.retrying}: a retryable error; {self.harness} goes on in its "
                    f"session (retry {self.retries} of {RETRIES})")))
                self.retrying = ""
            return CONTINUE.format(goal=self.goal or task.goal)
        if self.turns == 0:
            return self.handed + (self.goal or task.goal)
        return None

    def _action(self, task: Task, prompt: str) -> Action:
        if self.session is None and self.new_session is None and self.harness == "claude":
            self.new_session = str(uuid.uuid4())  # chosen first: a crash cannot lose it
        params: dict[str, Any] = {
            "harness": self.harness, "args": [self.harness], "prompt": prompt, "turn": task.turn,
            "session": self.session or (self.new_session if self.turns else None),
            "new_session": None if self.session else self.new_session,
            "continue_last": self.interrupted, "model": self.model, "base_url": self.base_url,
            "prices": _prices(self.model),
        }
        context = self._context(task)
        if context:
            params["context"] = context
        if task.limits.max_cost_usd is not None:
            params["budget_usd"] = max(task.limits.max_cost_usd - task.usage.cost_usd, 0.0)
        head = prompt.strip().splitlines()[0] if prompt.strip() else ""
        return Action(tool="harness", params=params, text=f"{self.harness}: {head[:120]}")

    def _context(self, task: Task) -> dict[str, Any]:
        """What normalize adds to the harness's system prompt this turn ({}: nothing): the
        input memory is recalled for (the tool asks the run's memory: never in the action),
        the skills catalog, the skills `$NAME` names."""
        said = "\n".join([self.goal or task.goal, *self.follow_ups])
        context: dict[str, Any] = {"recall": said} if self.recall is not None else {}
        catalog = self.skills
        if catalog is None or not catalog.skills:
            return context
        cap = catalog_cap(self.model or DEFAULT_MODELS.get(self.harness, ""))
        section = catalog.section(cap, locate=lambda s: f"{SKILLS_MARK}/{s.name}/SKILL.md")
        named = [n for n in dict.fromkeys(SKILL_REF_RE.findall(said)) if catalog.get(n)]
        context["catalog"] = section
        context["skills"] = {  # the files to copy: those the catalog shows, those named
            s.name: [str(s.directory), s.digest] for s in catalog.skills.values()
            if s.name in named or f"{SKILLS_MARK}/{s.name}/SKILL.md" in section}
        if named:
            context["named"] = named
        return context

    def _finish(self) -> Decision:
        ended = self.ended or {}
        if ended.get("error"):
            return Decision.finish(str(ended["error"]), status=TaskStatus.FAILED)
        return Decision.finish(str(ended.get("summary") or f"{self.harness} finished"))

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:  # noqa: ARG002
        data = result.data
        self.turns += 1
        if data.get("session"):
            self.session = str(data["session"])
        usage = data.get("usage")
        if isinstance(usage, dict):
            task.usage.add(Usage(**{k: usage[k] for k in (
                "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "cost_usd", "requests") if k in usage}))
        self.interrupted = result.status in (ResultStatus.INTERRUPTED, ResultStatus.CANCELLED)
        if data.get("stopped") == "budget":
            self.interrupted = True  # more budget, then resume: it goes on
        elif data.get("retryable") and self.retries < RETRIES:
            self.retries += 1  # the model API failed for now: the same session, again
            self.interrupted, self.retrying = True, str(result.error or "")
        elif not self.interrupted:
            failed = result.status in (ResultStatus.ERROR, ResultStatus.BLOCKED)
            self.ended = {"summary": _summary(result.output),
                          "error": (result.error or "failed") if failed else None}


def _summary(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _prices(model: str | None) -> dict[str, float]:
    """USD per million tokens of `model` (normalize's table), for a harness reporting no cost."""
    from normalize.providers.pricing import DEFAULT_TABLE

    price = DEFAULT_TABLE.lookup(model or "") if model else None
    if price is None:
        return {}
    return {"input": price.input, "output": price.output, "cache_read": price.cache_read,
            "cache_write": price.cache_write}


class ClaudeDriver(HarnessDriver):
    """Claude Code takes each turn."""

    name: ClassVar[str] = "claude"
    harness: ClassVar[str] = "claude"


class CodexDriver(HarnessDriver):
    """Codex CLI takes each turn."""

    name: ClassVar[str] = "codex"
    harness: ClassVar[str] = "codex"


class AiderDriver(HarnessDriver):
    """aider takes each turn."""

    name: ClassVar[str] = "aider"
    harness: ClassVar[str] = "aider"
