"""The LLM driver: a model decides each step of a task.

Each turn the context strategy (`normalize.execution.context`) builds the
prompt, `providers.complete` sends it (streaming deltas out as events,
retrying, falling back to other models), and the reply is parsed by the one
command-language parser into a Decision. Results come back through
`on_result` and feed the context strategy.

Config — the `[workflow.llm]` table (`from_config` takes a task's
`{"spec": WorkflowSpec dict}`, or `{"llm": {...}, "context": {...}, "vars":
{...}, "goal": TEMPLATE}` directly):

    provider, model     `anthropic` + `claude-sonnet-4-5`; `model` may be a whole
                        `PROVIDER:MODEL` spec (`ollama:llama3.1`, `replay:TASKID`)
    fallback            models tried in order when the main one keeps failing
    base_url            the provider's endpoint (a proxy, a local server)
    thinking            ask for visible reasoning (Anthropic extended thinking)
    max_actions         commands run per reply (more are dropped, with a note)
    allow_parallel      honour a `parallel` line
    max_tokens, temperature
    system_prompt, system_prompt_file   replace the text of `prompts/dwim.md`
    prices              {model: {input, output, cache_read, cache_write}} USD/Mtok

The goal shown to the model is the task's goal, or the `goal` template (a
workflow variable) with `{task}` and the other variables filled in.

Rules the driver keeps:
- A reply with neither a command nor `done` gets one corrective note; a
  second one in a row ends the task `failed`.
- `done` after commands in the same reply takes effect once they all
  succeeded; when one failed, the model is told and goes on.
- `done` while a subtask of a plan is current closes that subtask and moves
  to the next (task_tree and task_list; see the context module).
- The same command with the same result three times: a `loop_detected`
  event and a note to the model; once more and the task ends `stuck`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, LineQueue, RunContext
from normalize.drivers.models import LLMSettings
from normalize.errors import ConfigError, NormalizeError
from normalize.events import (
    ContextCompacted,
    FallbackUsed,
    InputReceived,
    LoopDetected,
    ModelReplied,
    ModelRequested,
    ModelRetried,
    Notice,
    TextDelta,
    ThinkingDelta,
)
from normalize.execution.context import make_context
from normalize.execution.context.base import ContextStrategy
from normalize.execution.context.results import Prompt, bounded, neutralise, signature
from normalize.intents import parse
from normalize.keys import parse_table
from normalize.providers import base as model_events
from normalize.providers.base import (
    MODEL_RETRY,
    Completed,
    ModelClient,
    ModelRequest,
    TurnCancelledError,
    close_client,
    complete,
)
from normalize.providers.pricing import DEFAULT_TABLE, PriceTable
from normalize.retry import RetryPolicy
from normalize.skills.catalog import Catalog, catalog_cap
from normalize.tables import ContextSettings
from normalize.task import Action, ActionResult, Decision, Task, TaskStatus, Usage

ModelFactory = Callable[..., ModelClient]
"""`factory(spec, *, base_url=None, **opts) -> ModelClient`, like `create_client`."""

SKILL_REF_RE = re.compile(r"(?<![\w$])\$([a-z0-9][a-z0-9-]{0,63})\b")
SKILL_BODY_CHARS = 20_000
"""A loaded skill's instructions past this are cut, with a note naming its file."""
LOOP_REPEATS = 3
LOOP_WINDOW = 24
STATE_VERSION = 1

CORRECTIVE_NOTE = (
    "Your last reply held no command. Every reply must end with command lines "
    "(for example `view PATH`, `grep PATTERN`, `edit PATH <<EOF`), or `done SUMMARY` "
    "when the task is finished. Write each command on its own line, without backticks."
)

@dataclass(frozen=True)
class Models:
    """Where the driver's model clients come from, and how their calls are retried."""

    factory: ModelFactory | None = None  # None: the provider registry's `create_client`
    retry: RetryPolicy = MODEL_RETRY
    resolve_journal: Callable[[str], Path] | None = None  # the journal `replay:TASKID` names


@dataclass(frozen=True)
class Briefing:
    """What the model is told beyond the task: the goal template and its variables, the
    instruction files, the follow-up instructions given after the goal (in order)."""

    goal: str | None = None  # a template over `variables`, `{task}` and `{workspace}`
    variables: Mapping[str, Any] = field(default_factory=dict)
    prompt_dir: Path | None = None  # where `system_prompt_file` is found (the workflow's dir)
    project_instructions: bool = True  # AGENTS.md / CLAUDE.md into the prompt
    config_dir: Path | None = None  # where the user-wide AGENTS.md lives
    follow_ups: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()  # the workflow's `skills`: loaded before the first request
    skills_grant: bool = True  # … and pre-approve their `allowed-tools` (untrusted file: no)


@dataclass(frozen=True)
class Lent:
    """What the run lends the prompt, asked each turn (each may be absent)."""

    inbox: LineQueue | None = None  # lines typed at the terminal while the model works
    extra_commands: Callable[[], str] | None = None  # more commands than the verbs (MCP tools)
    repo_map: Callable[[], str] | None = None  # the repo map's text (the tools' cached map)
    recall: Callable[[str], str] | None = None  # memory for the run's input: the guarded message
    skills: Catalog | None = None  # the Agent Skills: a catalog in the prompt, bodies when loaded
    remember: bool = False  # the run keeps what the model proposes with `remember`
    pre_approve: Callable[[str], list[str]] | None = None  # a loaded skill's `allowed-tools`


def _context(table: Mapping[str, Any] | str) -> ContextSettings:
    """The `context` table of a driver's JSON config, checked against its declared keys."""
    if isinstance(table, str):
        table = {"strategy": table}
    return parse_table(ContextSettings, table, "context",
                       name=lambda k: f"context {k}" if k == "repo_map" else repr(k))


def record_reply(task: Task, ctx: RunContext, reply: Completed, *, turn: int,
                 prices: PriceTable = DEFAULT_TABLE, unpriced: set[str] | None = None) -> float:
    """Add a reply's tokens and cost to `task.usage`, journal it as `model_replied`.

    The journaled text is what `replay:TASKID` plays back. A model missing from
    the price table costs $0 and is reported once per `unpriced` set. Returns
    the cost in USD. For any code that calls a model on a task's behalf.
    """
    usage = reply.usage
    estimate = prices.estimate(reply.spec, usage)
    if not estimate.known and (unpriced is None or reply.spec not in unpriced):
        if unpriced is not None:
            unpriced.add(reply.spec)
        ctx.emit(Notice(level="warning", message=(
            f"no price known for {reply.spec}: its cost counts as $0 against the budget "
            "(add it under [workflow.llm.prices])")))
    task.usage.add(Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                         cache_read_tokens=usage.cache_read_tokens,
                         cache_write_tokens=usage.cache_write_tokens,
                         cost_usd=estimate.usd, requests=1))
    ctx.emit(ModelReplied(turn=turn, model=reply.spec, text=reply.text,
                          thinking=reply.thinking, stop_reason=reply.stop_reason,
                          input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                          cache_read_tokens=usage.cache_read_tokens,
                          cache_write_tokens=usage.cache_write_tokens,
                          cost_usd=round(estimate.usd, 8)), durable=True)
    return estimate.usd


def _briefing(config: dict[str, Any], spec: dict[str, Any], config_dir: Path | None
              ) -> Briefing:
    """What the driver tells the model of the task: its goal, vars, prompts and skills."""
    variables = {**(spec.get("vars") or {}), **(config.get("vars") or {})}
    goal = config.get("goal") or variables.get("goal")
    path = spec.get("path")
    return Briefing(goal=str(goal) if goal else None, variables=variables,
                    prompt_dir=Path(path).parent if path else None,
                    project_instructions=bool(config.get("project_instructions", True)),
                    config_dir=config_dir,
                    follow_ups=tuple(str(f) for f in config.get("follow_ups") or []),
                    skills=tuple(str(s) for s in spec.get("skills") or []),
                    skills_grant=spec.get("origin") != "workspace")


class LLMDriver:
    """Asks a model for each decision; see the module docstring."""

    name: ClassVar[str] = "llm"
    redecides_on_resume: ClassVar[bool] = True
    """After a stop, the model sees what happened to its last decision before more of it runs."""
    model_settings: ClassVar[str] = "llm"  # traits: normalize.contract.driver
    remembers: ClassVar[bool] = True
    takes_follow_ups: ClassVar[bool] = True
    reads_typed_lines: ClassVar[bool] = True
    checks_output: ClassVar[bool] = True

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        context: ContextStrategy | None = None,
        models: Models | None = None,
        briefing: Briefing | None = None,
        lent: Lent | None = None,
        repo_map_tokens: int = 0,
    ) -> None:
        self.settings = settings or LLMSettings()
        self.context = context or make_context()
        self.models = models or Models()
        self.briefing = briefing or Briefing()
        self.lent = lent or Lent()
        self.repo_map_tokens = repo_map_tokens  # [workflow.context] repo_map (0: none)
        self.nested_seen: list[str] = []  # nested AGENTS.md files already given
        self.follow_ups_seen = 0  # follow-ups the model has been told about
        self.prices: PriceTable = (DEFAULT_TABLE.merged(self.settings.prices)
                                   if self.settings.prices else DEFAULT_TABLE)
        self._client: ModelClient | None = None
        self._fallbacks: list[ModelClient] = []
        self._system: str | None = None
        self._instruction_notices: list[str] = []
        self._unpriced: set[str] = set()
        # persisted state (bounded)
        self.facts: list[str] = []
        self.malformed = 0
        self.done_after: str | None = None
        self.turn_ok = True
        self.failed_command = ""
        self.recent: list[str] = []
        self.warned: list[str] = []
        self.loops: list[dict[str, Any]] = []
        self.stuck: str | None = None
        self.played = 0  # replies the main model gave: a scripted model resumes after them
        self.played_spec = ""  # … if it is still the same model
        self.invalid_results = 0  # results that failed the task's output schema
        self.skills_loaded: list[str] = []  # skills whose instructions every prompt now carries
        self.skills_missing: list[str] = []  # the workflow's skills not found (said once)
        self.skills_granting: list[str] = []  # loaded skills whose `allowed-tools` apply
        self._granted: set[str] = set()  # … given to this run's approval policy already
        self._grant_notes: list[str] = []  # what they pre-approve, said at the next decision

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> LLMDriver:
        """Build from a task's driver config (see the module docstring)."""
        spec = config.get("spec") or {}
        settings = LLMSettings.from_config(spec.get("llm") or config.get("llm") or {})
        context = _context(spec.get("context") or config.get("context") or {})
        tokens = context.repo_map or 0
        return cls(settings, context=make_context(context.strategy, **context.options()),
                   models=Models(services.model_factory, services.model_retry or MODEL_RETRY,
                                 services.resolve_journal),
                   briefing=_briefing(config, spec, services.config_dir),
                   lent=Lent(services.inbox, services.extra_commands,
                             services.repo_map(tokens) if tokens and services.repo_map
                             else None, services.recall, services.skills,
                             services.remember, services.pre_approve),
                   repo_map_tokens=tokens)

    @property
    def repo_map(self) -> Callable[[], str] | None:
        """The repo map's text, asked for each turn (None: no map in the prompt)."""
        return self.lent.repo_map

    # -- state -------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "context": self.context.snapshot(),
            "facts": list(self.facts),
            "malformed": self.malformed,
            "done_after": self.done_after,
            "turn_ok": self.turn_ok,
            "failed_command": self.failed_command,
            "recent": list(self.recent),
            "warned": list(self.warned),
            "loops": list(self.loops),
            "stuck": self.stuck,
            "played": self.played,
            "played_spec": self.played_spec,
            "nested_seen": list(self.nested_seen),
            "follow_ups_seen": self.follow_ups_seen,
            "invalid_results": self.invalid_results,
            "skills_loaded": list(self.skills_loaded),
            "skills_missing": list(self.skills_missing),
            "skills_granting": list(self.skills_granting),
        }

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("v") != STATE_VERSION:
            return  # another driver's state (`resume --driver llm`): start fresh
        self.context.restore(state.get("context") or {})
        self.facts = [str(f) for f in state.get("facts", [])]
        self.malformed = int(state.get("malformed", 0))
        self.invalid_results = int(state.get("invalid_results", 0))
        self.done_after = state.get("done_after")
        self.turn_ok = bool(state.get("turn_ok", True))
        self.failed_command = str(state.get("failed_command", ""))
        self.recent = [str(s) for s in state.get("recent", [])]
        self.warned = [str(s) for s in state.get("warned", [])]
        self.loops = list(state.get("loops", []))
        self.stuck = state.get("stuck")
        self.played = int(state.get("played", 0))
        self.played_spec = str(state.get("played_spec", ""))
        self.nested_seen = [str(p) for p in state.get("nested_seen", [])]
        self.follow_ups_seen = int(state.get("follow_ups_seen", 0))
        self.skills_loaded = [str(s) for s in state.get("skills_loaded", [])]
        self.skills_missing = [str(s) for s in state.get("skills_missing", [])]
        self.skills_granting = [str(s) for s in state.get("skills_granting", [])]

    # -- the model ---------------------------------------------------------

    def _make(self, spec: str) -> ModelClient:
        opts: dict[str, Any] = {}
        if spec.startswith("replay:") and self.models.resolve_journal is not None:
            opts["resolve_journal"] = self.models.resolve_journal
        if spec.startswith("scripted:") and self.played and \
                _script_key(spec) == self.played_spec:
            opts["skip"] = self.played  # a resumed task goes on with its next reply
        if self.models.factory is not None:
            return self.models.factory(spec, base_url=self.settings.base_url, **opts)
        from normalize.providers.registry import create_client

        return create_client(spec, base_url=self.settings.base_url, **opts)

    def clients(self, ctx: RunContext | None = None) -> tuple[ModelClient, list[ModelClient]]:
        """The main model and the fallbacks, created on first use.

        A fallback that cannot be made (no key for its provider, say) is left
        out with a warning; the main model failing to be made is an error.
        """
        if self._client is None:
            self._client = self._make(self.settings.spec)
            self._fallbacks = []
            for spec in self.settings.fallback_specs:
                try:
                    self._fallbacks.append(self._make(spec))
                except NormalizeError as err:
                    if ctx is not None:
                        ctx.emit(Notice(level="warning",
                                        message=f"fallback {spec} left out: {err}"))
        return self._client, self._fallbacks

    def close(self) -> None:
        """Release the model clients' connections."""
        for client in [self._client, *self._fallbacks]:
            if client is not None:
                close_client(client)
        self._client, self._fallbacks = None, []

    def system_prompt(self, workspace: Path) -> str:
        """The system prompt: identical on every turn while the repo map is (prompt caching).

        All but the repo map is built once; the map (`[workflow.context]
        repo_map`) is asked for each turn and changes only when the source files do.
        """
        return self._stable_prompt(workspace) + self._repo_map_section()

    def _repo_map_section(self) -> str:
        if not self.repo_map_tokens or self.lent.repo_map is None:
            return ""
        text = self.lent.repo_map()
        if not text:
            return ""
        from normalize.prompts import repo_map_section

        return "\n" + repo_map_section(bounded(neutralise(text, self.context.marker),
                                               self.context.marker), self.repo_map_tokens)

    def _stable_prompt(self, workspace: Path) -> str:
        if self._system is None:
            from normalize.prompts import (
                build_system_prompt,
                default_prompt,
                read_prompt_file,
                workspace_facts,
            )

            if self.settings.system_prompt:
                text = self.settings.system_prompt
            elif self.settings.system_prompt_file:
                text = read_prompt_file(self.settings.system_prompt_file,
                                        self.briefing.prompt_dir)
            else:
                text = default_prompt()
            self.facts = self.facts or workspace_facts(workspace)
            instructions = ""
            if self.briefing.project_instructions:
                from normalize.prompts.instructions import project_instructions

                found = project_instructions(workspace, self.briefing.config_dir)
                instructions = found.text
                self._instruction_notices = list(found.notices)
            commands = self.lent.extra_commands
            catalog = self._catalog()
            omit = [*(() if commands is not None else ("mcp",)),  # no server: no verb
                    *(() if catalog else ("skill",)),  # no skill to load: no verb either
                    *(() if self.lent.remember else ("remember",))]  # no memory this run
            self._system = build_system_prompt(text, self.facts, instructions, omit=omit)
            extra = commands() if commands is not None else ""
            if extra:
                self._system += "\n" + extra
            if self.lent.recall is not None:  # memory is on: how it ranks
                from normalize.prompts import MEMORY_RANKS_LAST

                self._system += "\n" + MEMORY_RANKS_LAST + "\n"
            if catalog:  # names and descriptions only: the same every turn (cached)
                self._system += "\n" + catalog
        return self._system

    def _catalog(self) -> str:
        """The skills catalog, capped at its share of the model's context window ('' none)."""
        if self.lent.skills is None:
            return ""
        return self.lent.skills.section(catalog_cap(self.settings.spec,
                                                    self.settings.context_window))

    def goal(self, task: Task) -> str:
        """The goal as the model reads it, with the follow-up instructions after it."""
        goal = task.goal
        if self.briefing.goal:
            from normalize.workflow.interpolate import interpolate

            values = {**self.briefing.variables, "task": task.goal, "workspace": task.workspace}
            try:
                goal = interpolate(self.briefing.goal, values)
            except (KeyError, IndexError, TypeError) as err:
                raise ConfigError(f"goal {self.briefing.goal!r}: unknown variable {err}"
                                  ) from None
        if not self.briefing.follow_ups:
            return goal
        *earlier, latest = self.briefing.follow_ups
        lines = [f"- (done) {text}" for text in earlier]
        return (f"{goal.rstrip()}\n\nThat was done. Follow-up instructions from the user:\n"
                + "".join(line + "\n" for line in lines) + f"- (now) {latest}")

    def _take_follow_ups(self, ctx: RunContext) -> None:
        """A new follow-up instruction restarts the task's ending (and joins the journal)."""
        follow_ups = self.briefing.follow_ups
        if len(follow_ups) > self.follow_ups_seen:
            for text in follow_ups[self.follow_ups_seen:]:
                ctx.emit(InputReceived(kind="follow_up", answer=text))
            self.follow_ups_seen = len(follow_ups)
            self.done_after, self.stuck, self.malformed = None, None, 0
            self.turn_ok, self.failed_command = True, ""
            self.recent, self.warned = [], []
            self.context.add_feedback(f"New instruction from the user: {follow_ups[-1]}")

    def _take_typed(self, ctx: RunContext) -> None:
        """Lines typed meanwhile join the request about to be made (never a finishing turn's:
        they stay queued, and the caller makes them a follow-up)."""
        if self.lent.inbox is not None:
            for line in self.lent.inbox.drain():
                self.context.add_feedback(f"The user wrote while you worked: {line}")
                ctx.emit(InputReceived(kind="typed", answer=line))

    # -- deciding ------------------------------------------------------------

    def _prompt(self, task: Task, ctx: RunContext, memory: str = "") -> Prompt:
        """This turn's messages, compacted past the size unless a `before_compact` hook says no;
        `memory` (the transient memory message) counts toward the size."""
        ask = ctx.compact_veto
        veto = None if ask is None else lambda c: ask({
            "turn": task.turn, "before_chars": c.before_chars, "after_chars": c.after_chars,
            "results_compacted": c.results_compacted,
            "compact_after_chars": self.context.compact_after_chars})
        prompt = self.context.build(self.goal(task), task.turn, veto, extra_chars=len(memory))
        if prompt.compaction is not None:
            c = prompt.compaction
            ctx.emit(ContextCompacted(before_chars=c.before_chars, after_chars=c.after_chars,
                                      results_compacted=c.results_compacted))
        if prompt.kept is not None:
            c, reason = prompt.kept
            ctx.emit(Notice(level="info", message=(
                f"context not compacted ({c.before_chars:,} characters): a before_compact "
                f"hook said no: {reason}")))
        return prompt

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        self._take_follow_ups(ctx)
        for loop in self.loops:
            ctx.emit(LoopDetected(command=loop["command"], repeats=loop["repeats"]))
        self.loops = []
        if self.stuck:
            return Decision.finish(f"stuck: {self.stuck}", status=TaskStatus.STUCK)
        if self.done_after is not None:
            summary, self.done_after = self.done_after, None
            if self.turn_ok:
                finished = self._done(summary, ctx)
                if finished is not None:
                    return finished
            else:
                self.context.add_feedback(
                    f"`done` was not applied: `{self.failed_command}` did not succeed. "
                    "Deal with it, then finish with done."
                )
        self._take_typed(ctx)
        self._preload_skills(task, ctx)
        self._grant_skills(ctx)
        memory = self._memory(task)
        skills = self._skills_message()
        prompt = self._prompt(task, ctx, memory + skills)
        system = self.system_prompt(ctx.workspace)
        if task.output is not None:  # the same each turn: it stays in the cached prefix
            system = f"{system}\n\n## Result\n{task.output.instructions()}"
        for notice in self._instruction_notices:
            ctx.emit(Notice(level="warning", message=notice))
        self._instruction_notices = []
        # memory rides its own user message right after the cached system prompt, ahead of
        # the conversation (it frames it, and stays put while the history grows); never kept
        # the loaded skills' instructions likewise: outside the conversation, so no compaction
        # ever drops them
        messages = [*({"role": "user", "content": text} for text in (skills, memory) if text),
                    *prompt.messages]
        request = ModelRequest(
            system=system, messages=messages,
            max_tokens=self.settings.max_tokens, thinking=self.settings.thinking,
            temperature=self.settings.temperature,
            # a growing history caches up to its newest message; a bounded prompt cannot
            cache_messages=not self.context.bounded, cache_key=task.id,
        )
        request = _with_hook_context(request, task, ctx)
        try:
            reply = self._ask(request, task, ctx)
        except TurnCancelledError:
            return Decision.finish("interrupted", status=TaskStatus.INTERRUPTED)
        return self._interpret(reply, task, ctx)

    def _preload_skills(self, task: Task, ctx: RunContext) -> None:
        """The workflow's `skills`, and `$NAME` in the goal or a follow-up, load those skills
        (when the catalog has them; a workflow's name it lacks is said once)."""
        catalog = self.lent.skills
        if catalog is None:
            return
        wanted = [(name, "the workflow's skills") for name in self.briefing.skills]
        wanted += [(name, f"${name} in the task") for name in SKILL_REF_RE.findall(self.goal(task))]
        for name, why in wanted:
            if name in self.skills_loaded or name in self.skills_missing:
                continue
            if catalog.get(name) is not None:
                self.skills_loaded.append(name)
                ctx.emit(Notice(message=f"skill {name} loaded ({why})"))
                if self.briefing.skills_grant or not why.startswith("the workflow"):
                    self.skills_granting.append(name)
            elif why.startswith("the workflow"):
                self.skills_missing.append(name)
                ctx.emit(Notice(level="warning", message=(
                    f"the workflow's skill {name!r} is not here (or not trusted): "
                    "`normalize skills list` shows the skills a run here may use")))

    def _grant_skills(self, ctx: RunContext | None) -> None:
        """The loaded skills' `allowed-tools` into the run's approval policy (once a run: a
        resumed task's skills grant again); what they pre-approve is said (`ctx`: now)."""
        grant = self.lent.pre_approve
        for name in self.skills_granting:
            if grant is not None and name not in self._granted:
                self._granted.add(name)
                self._grant_notes += grant(name)
        if ctx is not None:
            for line in self._grant_notes:
                ctx.emit(Notice(level="warning" if "allowed-tools" in line else "info",
                                message=line))
            self._grant_notes = []

    def _skills_message(self) -> str:
        """The loaded skills' instructions, each wrapped and marked, resources listed ('' none)."""
        catalog = self.lent.skills
        if catalog is None or not self.skills_loaded:
            return ""
        parts = []
        for name in self.skills_loaded:
            skill = catalog.get(name)
            if skill is None:
                continue
            body = skill.body()
            if len(body) > SKILL_BODY_CHARS:
                body = (body[:SKILL_BODY_CHARS] + f"\n[cut at {SKILL_BODY_CHARS:,} characters: "
                        f"the rest is in {skill.file}]")
            resources = skill.resources()
            listed = ("\nIts files (not read; `view` one when the instructions say so): "
                      + ", ".join(f"{skill.directory}/{r}" for r in resources)) if resources \
                else ""
            parts.append(f'<skill name="{name}" file="{skill.file}">\n{body}{listed}\n</skill>')
        if not parts:
            return ""
        return ("Skills in use (instructions the user installed, loaded for this task; they "
                "rank below AGENTS.md and the user's words):\n" + "\n".join(parts) + "\n")

    def _memory(self, task: Task) -> str:
        """The memory message for this request, retrieved by the run's input ('' for none)."""
        if self.lent.recall is None:
            return ""
        return self.lent.recall(self.goal(task))

    def _ask(self, request: ModelRequest, task: Task, ctx: RunContext) -> Completed:
        """One model turn: events for each attempt, usage and cost on the task."""
        client, fallbacks = self.clients(ctx)
        chars = len(request.system) + sum(len(str(m["content"])) for m in request.messages)
        turn = task.turn
        current = [client.model]

        def on_event(event: model_events.ModelEvent) -> None:
            if isinstance(event, model_events.TextDelta):
                ctx.emit(TextDelta(text=event.text))
            elif isinstance(event, model_events.ThinkingDelta):
                ctx.emit(ThinkingDelta(text=event.text))

        def on_retry(attempt: int, delay: float, reason: str) -> None:
            ctx.emit(ModelRetried(attempt=attempt, delay=round(delay, 3), reason=reason))
            ctx.emit(ModelRequested(turn=turn, model=current[0], attempt=attempt,
                                    input_chars=chars))

        def on_fallback(from_model: str, to_model: str, reason: str) -> None:
            current[0] = to_model
            ctx.emit(FallbackUsed(from_model=from_model, to_model=to_model, reason=reason))
            ctx.emit(ModelRequested(turn=turn, model=to_model, attempt=1, input_chars=chars))

        ctx.emit(ModelRequested(turn=turn, model=client.model, attempt=1, input_chars=chars))
        reply = complete(client, request, on_event=on_event, retry=self.models.retry,
                         cancel=ctx.cancel, fallbacks=fallbacks, on_retry=on_retry,
                         on_fallback=on_fallback)
        record_reply(task, ctx, reply, turn=turn, prices=self.prices, unpriced=self._unpriced)
        if current[0] == client.model:
            key = _script_key(self.settings.spec)
            if self.played_spec != key:
                self.played, self.played_spec = 0, key
            self.played += 1
        return reply

    def _interpret(self, reply: Completed, task: Task, ctx: RunContext) -> Decision:
        """The Decision a reply asks for, with notes to the model about what went wrong."""
        parsed = parse(reply.text, max_actions=self.settings.max_actions)
        self.context.add_reply(reply.text, parsed.thinking, task.turn)
        for fix in parsed.corrections:
            ctx.emit(Notice(message=f"read `{fix.word}` as `{fix.corrected_to}`"))
        problems = list(parsed.problems)
        if reply.stop_reason in ("max_tokens", "length"):
            problems.append("your reply was cut off at max_tokens; keep replies shorter")
        if parsed.parallel and not self.settings.allow_parallel:
            parsed.parallel = False
            problems.append("`parallel` is off in this workflow; the commands ran in order")
        if problems:
            self.context.add_feedback("Problems with your last reply: " + "; ".join(problems))
            ctx.emit(Notice(level="warning", message="; ".join(problems)))
        if not parsed.actions and not parsed.done:
            self.malformed += 1
            if self.malformed > 1:
                return Decision(thinking=parsed.thinking, done=True, status=TaskStatus.FAILED,
                                summary="the model replied again without a command or done")
            hint = f" ({'; '.join(parsed.suggestions)})" if parsed.suggestions else ""
            self.context.add_feedback(CORRECTIVE_NOTE + hint)
            ctx.emit(Notice(level="warning",
                            message="the reply held no command; asking the model again"))
            return Decision(thinking=parsed.thinking)
        self.malformed = 0
        if parsed.actions:
            if parsed.done:
                self.done_after = parsed.summary
            self.turn_ok, self.failed_command = True, ""
            return Decision(actions=parsed.actions, thinking=parsed.thinking,
                            parallel=parsed.parallel)
        finished = self._done(parsed.summary, ctx)
        if finished is not None:
            finished.thinking = parsed.thinking
            return finished
        return Decision(thinking=parsed.thinking)

    def _done(self, summary: str, ctx: RunContext) -> Decision | None:
        """`done`: close the current subtask (None: the task goes on) or end the task."""
        moved = self.context.close_subtask(summary)
        if moved is None:
            return self._finish(summary, ctx)
        self.context.add_feedback(moved)
        ctx.emit(Notice(message=moved))
        return None

    def _finish(self, summary: str, ctx: RunContext) -> Decision | None:
        """End the task; with an output schema, only with a valid result (bounded retries)."""
        contract = ctx.task.output
        if contract is None:
            return Decision.finish(summary or "done")
        from normalize.structured import check

        checked = check(contract, summary)
        if checked.error is None:
            head = summary.strip().splitlines()[0] if "\n" in summary.strip() else "done"
            return Decision.finish(head, result=checked.value)
        self.invalid_results += 1
        ctx.emit(Notice(level="warning", message=checked.error))
        if self.invalid_results > contract.retries:
            return Decision.finish(f"no valid result: {checked.error}", status=TaskStatus.FAILED)
        self.context.add_feedback(f"Your result was not accepted: {checked.error}. "
                                  "Finish again with a valid result.")
        return None

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        entry = self.context.add_result(action, result, task.turn)
        path = result.data.get("path")
        if self.briefing.project_instructions and isinstance(path, str) and path:
            self._nested_instructions(Path(task.workspace), path)
        if result.ok:
            if action.tool == "note" and result.data.get("note"):
                turns = result.data.get("turns")
                self.context.add_note(str(result.data["note"]),
                                      int(turns) if turns else None, task.turn)
            elif action.tool == "skill" and result.data.get("skill"):
                self._load_skill(str(result.data["skill"]))
            elif action.tool == "plan" and result.data.get("plan"):
                moved = self.context.add_plan([str(s) for s in result.data["plan"]])
                if moved:
                    self.context.add_feedback(moved)
        else:
            self.turn_ok, self.failed_command = False, entry.head
        self._watch_loops(action, result, entry.head)

    def _load_skill(self, name: str) -> None:
        """`skill NAME`: its instructions join every later prompt (said once if already there)."""
        catalog = self.lent.skills
        if catalog is None or catalog.get(name) is None:
            known = ", ".join(sorted(catalog.skills)) if catalog is not None else ""
            self.context.add_feedback(f"There is no skill {name!r}"
                                      + (f" (the catalog has: {known})." if known else "."))
        elif name in self.skills_loaded:
            self.context.add_feedback(f"Skill {name} is already loaded: its instructions are in "
                                      "the `Skills in use` message.")
        else:
            self.skills_loaded.append(name)
            self.skills_granting.append(name)
            self._grant_skills(None)  # at once: a later command of the same reply may need it
            self.context.add_feedback(f"Skill {name} loaded: its instructions are in the "
                                      "`Skills in use` message from now on.")

    def _nested_instructions(self, workspace: Path, path: str) -> None:
        """Give the model a nested AGENTS.md once, the first time the task works below it."""
        from normalize.prompts.instructions import nested_for

        seen = set(self.nested_seen)
        for shown, message in nested_for(workspace, path, seen):
            self.nested_seen.append(shown)
            self.context.add_feedback(message)

    def _watch_loops(self, action: Action, result: ActionResult, command: str) -> None:
        sig = signature(action, result)
        self.recent.append(sig)
        del self.recent[:-LOOP_WINDOW]
        repeats = self.recent.count(sig)
        if repeats < LOOP_REPEATS:
            return
        if sig in self.warned:
            self.stuck = f"`{command}` ran {repeats} times with the same result"
            return
        self.warned.append(sig)
        del self.warned[:-LOOP_WINDOW]
        self.loops.append({"command": command, "repeats": repeats})
        self.context.add_feedback(
            f"You ran `{command}` {repeats} times and got the same result each time. "
            "Running it again will not help: try something else, or finish with done."
        )


def _with_hook_context(request: ModelRequest, task: Task, ctx: RunContext) -> ModelRequest:
    """The request with what `before_request` hooks add, on its last message only (not kept)."""
    if ctx.request_context is None or not request.messages:
        return request
    extra = ctx.request_context({"turn": task.turn, "goal": task.goal,
                                 "last_message": request.last_message})
    if not extra:
        return request
    *earlier, last = request.messages
    content = last["content"]
    note = f"Context from the user's hooks:\n{extra}"
    added: Any = f"{content}\n\n{note}" if isinstance(content, str) else \
        [*content, {"type": "text", "text": note}]
    return replace(request, messages=[*earlier, {**last, "content": added}])


def _script_key(spec: str) -> str:
    """A model spec, with a script's content digest: an edited script starts from its top."""
    if not spec.startswith("scripted:"):
        return spec
    import hashlib

    try:
        digest = hashlib.sha256(Path(spec.split(":", 1)[1]).read_bytes()).hexdigest()[:16]
    except OSError:
        return spec
    return f"{spec}#{digest}"
