"""`normalize agent "TASK"`: the built-in dwim workflow with a model deciding each step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normalize.cli.commands import pin_replay, run_options, set_limits
from normalize.cli.console import Environment, error_line, fail, prompt_reader
from normalize.cli.follow import after_run, run_at_terminal
from normalize.cli.outcome import finish
from normalize.errors import ExitStatus, MissingKeyError, NormalizeError, UsageError

DEFAULT_WORKFLOW = "dwim"

MISSING_KEY = (
    "no API key for {spec}: set ANTHROPIC_API_KEY for Anthropic models, or OPENAI_API_KEY "
    "(OPENAI_BASE_URL for a compatible server) with --model openai:MODEL; or run a local "
    "model with --model ollama:MODEL; or drive a task yourself with "
    "`normalize resume ID --driver user`"
)


class _Clients:
    """A model factory that keeps the clients it made, so each is made (and checked) once."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, str | None], Any] = {}

    def __call__(self, spec: str, *, base_url: str | None = None, **opts: Any) -> Any:
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


def run_agent(env: Environment, goal: str, *, model: str | None, base_url: str | None,
              max_turns: int | None, budget: float | None, approve: str | None,
              context: str | None, workflow: str | None, workspace: Path | None,
              json_output: bool, quiet: bool, sandbox: str | None = None,
              network: bool | tuple[str, ...] | None = None, project_instructions: bool = True,
              repo_map: int | None = None, output_schema: Path | None = None,
              output_retries: int | None = None, otel: bool = False) -> int:
    """Run TASK with the agent workflow; returns the exit status."""
    from normalize.contract.driver import DriverServices
    from normalize.drivers.llm import LLMSettings
    from normalize.runner import apply_model, load_spec, start_task

    clients = _Clients()
    try:
        at_terminal = env.stdin_tty and env.stdout_tty and not json_output
        read = prompt_reader(env, lambda: (workspace or Path.cwd()).resolve()) \
            if at_terminal else None
        if not goal.strip() and read is not None:
            goal = read(TASK_PROMPT) or ""
        if not goal.strip():
            raise UsageError("TASK is empty: say what the agent should do")
        if budget is not None and budget <= 0:
            raise UsageError(f"--budget {budget:g}: must be more than 0 (USD)")
        root = (workspace or Path.cwd()).resolve()
        if not root.is_dir():
            raise UsageError(f"--workspace {root}: not a directory")
        spec = load_spec(workflow or DEFAULT_WORKFLOW, root)
        from normalize.cli.commands import set_output_retries

        set_output_retries(spec, output_retries, output_schema)
        model = pin_replay(model)
        if context:
            from normalize.execution.context import CONTEXTS

            if context not in CONTEXTS:
                raise UsageError(f"--context {context}: unknown strategy "
                                 f"(choose from {', '.join(sorted(CONTEXTS))})")
            spec.context = {**spec.context, "strategy": context}
        if repo_map is not None:
            from normalize.workflow.schema import out_of_range

            problem = out_of_range("context", "repo_map", repo_map)
            if problem:
                raise UsageError(f"--repo-map {repo_map}: {problem} (tokens; 0 leaves it out)")
            spec.context = {**spec.context, "repo_map": repo_map}
        if spec.llm is not None or model or base_url:
            spec.llm = dict(spec.llm or {})
            apply_model(spec.llm, model, base_url)
            settings = LLMSettings.from_config(spec.llm)
            if not settings.spec.startswith("replay:"):
                try:
                    clients(settings.spec, base_url=settings.base_url)
                except MissingKeyError:
                    error_line(env, MISSING_KEY.format(spec=settings.spec))
                    return int(ExitStatus.USAGE)
        options, renderer = run_options(env, workspace=root, json_output=json_output,
                                        quiet=quiet, approve=approve, sandbox=sandbox,
                                        network=network, otel=otel)
        options.services = DriverServices(read_line=options.services.read_line,
                                          model_factory=clients)
        options.project_instructions = project_instructions
        if output_schema is not None:
            from normalize.cli.commands import contract_for

            options.output = contract_for(spec.driver, output_schema)
        task = start_task(spec, goal, options)
        set_limits(task, max_turns=max_turns, budget=budget)
        if json_output or quiet:  # otherwise the run's first line names it
            env.stderr.write(f"task {task.id}\n")
            env.stderr.flush()
        from normalize.cli.sandbox import report_tier
        from normalize.cli.trust import report_ignored

        report_ignored(env, task)
        report_tier(env, task, options)
        outcome = run_at_terminal(env, task, options, renderer)
        code = finish(env, outcome, renderer, json_output)
        return after_run(env, outcome, options, code, None if quiet else read)
    except NormalizeError as exc:
        return fail(env, exc)
    finally:
        clients.close()
