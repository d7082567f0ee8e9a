"""`normalize agent "TASK"`: the built-in dwim workflow with a model deciding each step."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cli.commands import check_harness, launch_options, pin_replay, with_acp_command
from normalize.cli.console import Environment, Reader, error_line, fail, prompt_reader
from normalize.cli.launch import Going, set_output_retries, start, to_the_end, workspace_root
from normalize.cli.requests import Agent
from normalize.cli.taskinput import task_text
from normalize.contract.driver import DriverServices, driver_traits
from normalize.errors import ExitStatus, MissingKeyError, NormalizeError, UsageError
from normalize.runner import hand_over, load_spec, with_model

if TYPE_CHECKING:
    from normalize.providers.base import ModelClient
    from normalize.task import Task
    from normalize.workflow.spec import WorkflowSpec

DEFAULT_WORKFLOW = "dwim"

MISSING_KEY = (
    "no API key for {spec}: set ANTHROPIC_API_KEY for Anthropic models, or OPENAI_API_KEY "
    "(OPENAI_BASE_URL for a compatible server) with --model openai:MODEL; or run a local "
    "model with --model ollama:MODEL; or, without a model, take the turns yourself: a "
    "workflow file whose [workflow] table says driver = \"user\", run with "
    "`normalize run FILE --goal TEXT`"
)


class _Clients:
    """A model factory that keeps the clients it made, so each is made (and checked) once."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, str | None], ModelClient] = {}

    def __call__(self, spec: str, *, base_url: str | None = None, **opts: Any) -> ModelClient:
        from normalize.providers.registry import create_client

        key = (spec, base_url)
        if key not in self.made:
            self.made[key] = create_client(spec, base_url=base_url, **opts)
        return self.made[key]

    def close(self) -> None:
        from normalize.providers.base import close_client

        for client in self.made.values():
            close_client(client)
        self.made.clear()


TASK_PROMPT = "task › "


def launch_agent(env: Environment, request: Agent) -> int:
    """`normalize agent TASK`: TASK read (from the argument, `--task-file` or stdin), run."""
    return run_agent(env, request, task_text(env, request.task, request.task_file))


def run_agent(env: Environment, request: Agent, goal: str) -> int:
    """Run `goal` (TASK) with the agent workflow; returns the exit status."""
    clients = _Clients()
    try:
        read = _terminal_reader(env, request)
        if not goal.strip() and read is not None:
            goal = read(TASK_PROMPT) or ""
        if not goal.strip():
            raise UsageError("TASK is empty: say what the agent should do")
        root = workspace_root(request.workspace)
        spec = _agent_spec(env, request, root, clients)
        if spec is None:
            return int(ExitStatus.USAGE)
        options, renderer = launch_options(env, request, root)
        options.services = DriverServices(read_line=options.services.read_line,
                                          model_factory=clients)
        options.project_instructions = request.project_instructions
        task = start(env, spec, goal, options, output_schema=request.output_schema,
                     max_turns=request.max_turns, budget=request.budget,
                     named=request.json_output or request.quiet)
        with_acp_command(task, request.harness, options)
        if request.harness is not None:
            _flags_win(task, _single_model(request), request.base_url)
        return to_the_end(env, task, options, renderer, json_output=request.json_output,
                          going=Going(read=None if request.quiet else read))
    except NormalizeError as exc:
        return fail(env, exc)
    finally:
        clients.close()


def _terminal_reader(env: Environment, request: Agent) -> Reader | None:
    """A prompt at a terminal (for TASK left out, and follow-ups); None elsewhere."""
    if not (env.stdin_tty and env.stdout_tty and not request.json_output):
        return None
    return prompt_reader(env, lambda: (request.workspace or Path.cwd()).resolve())


def _single_model(request: Agent) -> str | None:
    """The one model every turn asks (`replay:last` pinned); None with --attempts."""
    return None if request.attempts else pin_replay(request.model)


def _agent_spec(env: Environment, request: Agent, root: Path,
                clients: _Clients) -> WorkflowSpec | None:
    """The workflow TASK runs: the agent's, with the flags' context, harness, model and
    attempts in it; None when a model it needs has no key (said)."""
    spec = load_spec(request.workflow or DEFAULT_WORKFLOW, root)
    set_output_retries(spec, request.output_retries, request.output_schema)
    models = request.models()
    model = _single_model(request)
    _set_context(spec, request.context, request.repo_map)
    if request.harness is not None:
        spec.driver = check_harness(request.harness)
        harness_model(spec.driver, model)
    if spec.llm is not None or model or request.base_url:
        spec.llm = with_model(spec.llm, model, request.base_url)
        if not _models_reachable(env, clients, spec, models, request.harness):
            return None
    if request.attempts:
        best_of_spec(spec, request.attempts, request.pick, models, request.max_turns)
    return spec


def _set_context(spec: WorkflowSpec, context: str | None, repo_map: int | None) -> None:
    """`--context` and `--repo-map` in the workflow's context settings, each checked first."""
    from normalize.keys import out_of_bounds
    from normalize.tables import ContextSettings

    if context:
        from normalize.execution.context import CONTEXTS

        if context not in CONTEXTS:
            raise UsageError(f"--context {context}: unknown strategy "
                             f"(choose from {', '.join(sorted(CONTEXTS))})")
        spec.context = replace(spec.context, strategy=context)
    if repo_map is not None:
        problem = out_of_bounds(ContextSettings, "repo_map", repo_map)
        if problem:
            raise UsageError(f"--repo-map {repo_map}: {problem} (tokens; 0 leaves it out)")
        spec.context = replace(spec.context, repo_map=repo_map)


def _models_reachable(env: Environment, clients: _Clients, spec: WorkflowSpec,
                      models: list[str], harness: str | None) -> bool:
    """Whether each model the run will ask (every attempt's) has its key (a harness's are its
    own); a local server not started is said before a task. A missing key is said as one
    line, and gives False."""
    from normalize.drivers.models import LLMSettings
    from normalize.runner import with_model

    choices: list[str | None] = [*models] or [None]
    for each in choices:
        settings = LLMSettings.of(with_model(spec.llm, each))
        if harness is not None or settings.spec.startswith("replay:"):
            continue
        try:
            client = clients(settings.spec, base_url=settings.base_url)
        except MissingKeyError:
            error_line(env, MISSING_KEY.format(spec=settings.spec))
            return False
        from normalize.cli.modelcheck import check_server

        check_server(client)  # a local server not started: said before a task
    return True


def _flags_win(task: Task, model: str | None, base_url: str | None) -> None:
    """`--model`/`--base-url` given with `--harness` go to the harness's own model server,
    over the workflow's model table (a driver of no model settings, `acp`, keeps its own)."""

    if (model or base_url) and driver_traits(task.driver).model_settings:
        hand_over(task, task.driver, model=model, base_url=base_url)


def harness_model(harness: str, model: str | None) -> None:
    """Refuse `--model` of an API the harness (a driver) does not speak (it would be dropped);
    an agent of no known API (`acp`) takes it as it is."""
    from normalize.drivers.harness import PROVIDERS
    from normalize.providers.registry import parse_spec

    api = PROVIDERS.get(harness)
    if model and api is not None and parse_spec(model)[0] != api:
        raise UsageError(f"--model {model}: {harness} speaks the {api} API; "
                         f"give --model {api}:MODEL")


def best_of_spec(spec: WorkflowSpec, attempts: int, pick: str | None, models: list[str],
                 max_turns: int | None) -> None:
    """Make `spec` run TASK as best-of-N: one `spawn --attempts` step (`subtasks.attempts`).

    The attempts take the spec's model settings (and `--model`'s, in turn); the
    parent itself is a one-step workflow.
    """
    from normalize.workflow.spec import StepSpec

    if not driver_traits(spec.driver).reads_llm_settings:
        raise UsageError(f"--attempts runs a workflow a model drives; {spec.name} is driven by "
                         f"{spec.driver}")
    spec.vars = {**spec.vars, "attempts": str(attempts), "pick": pick or "",
                 "models": ",".join(models), "turns": str(max_turns or "")}
    turns = " --max-turns {turns}" if max_turns else ""
    spec.steps = [StepSpec(name="attempts", action=(
        f"spawn --attempts {{attempts}} --pick {{pick}} --model {{models}}{turns} "
        "<<EOF\n{task}\nEOF"), capture="picked", transform=r"regex:^(attempt #[^\n]*)"),
        StepSpec(name="end", action="done {picked}")]
    spec.driver = "workflow"
