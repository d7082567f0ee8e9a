"""The `normalize` command line: a thin layer over the library.

Heavy modules (the anthropic SDK, httpx, prompt-toolkit) are imported only
inside the commands that need them, so `--help` and completion start fast.
"""

# No `from __future__ import annotations` here: typer reads every command's
# annotations at start-up, and string annotations cost it an eval each (~6 ms
# of `--help`). Annotations in this module must be valid at runtime.

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from normalize.errors import ExitStatus, NormalizeError

app = typer.Typer(
    name="normalize",
    help="Automate work on a codebase through pluggable drivers: workflows, state machines, "
         "models and people.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
tasks_app = typer.Typer(help="List, show, repair and remove tasks.", no_args_is_help=False,
                        rich_markup_mode=None)
app.add_typer(tasks_app, name="tasks")

JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the final summary.")]
ApproveOpt = Annotated[str | None, typer.Option(
    "--approve", help="Approval mode for side effects: ask, auto, yes, never.")]
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", help="What programs may touch: workspace (default), read-only, off.")]
NetworkOpt = Annotated[bool | None, typer.Option(
    "--network/--no-network", help="Let programs use the network (leaves the sandbox: asks).")]


def _env() -> Any:
    from normalize.cli.console import Environment

    return Environment()


def _driver_help() -> str:
    """The --driver help with every registered driver (entry points read, nothing imported)."""
    from normalize.drivers.builtin import BUILTIN_DRIVERS
    from normalize.plugins import advertised_names

    names = sorted({*BUILTIN_DRIVERS, *advertised_names("normalize.drivers")})
    return f"Continue with another driver: {', '.join(names)}."


def complete_task_ids(incomplete: str) -> list[str]:
    """Task ids for shell completion (reads file names only)."""
    from normalize.cli.complete import task_ids

    return task_ids(incomplete)


def complete_workflows(incomplete: str) -> list[str]:
    """Workflow names and `.toml` files for shell completion."""
    from normalize.cli.complete import workflows

    return workflows(incomplete)


@app.command()
def run(
    workflow: Annotated[str, typer.Argument(help="A workflow file, or a name (health, check, …).",
                                            autocompletion=complete_workflows)],
    var: Annotated[list[str] | None, typer.Option("--var", "-v", help="KEY=VALUE; repeatable.")]
    = None,
    goal: Annotated[str, typer.Option("--goal", help="The task text ({task}).")] = "",
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w",
                                                   help="Directory to work in.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=1)] = None,
    approve: ApproveOpt = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", envvar="NORMALIZE_MODEL",
        help="PROVIDER:MODEL for the workflow's model steps (llm-decide, llm transitions).")]
    = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="Base URL of the model server.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; run nothing.")]
    = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run a workflow file (steps, a state machine, or a model loop)."""
    from normalize.cli.commands import run_workflow

    raise typer.Exit(run_workflow(_env(), workflow, var or [], goal=goal, workspace=workspace,
                                  max_turns=max_turns, approve=approve, dry_run=dry_run,
                                  json_output=json_output, quiet=quiet, model=model,
                                  base_url=base_url, sandbox=sandbox, network=network))


@app.command()
def agent(
    task: Annotated[str, typer.Argument(
        help="What to do, in plain words (at a terminal, left out: asked for).")] = "",
    model: Annotated[str | None, typer.Option(
        "--model", "-m", envvar="NORMALIZE_MODEL",
        help="PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, "
             "ollama:llama3.1, scripted:FILE, replay:TASKID.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url",
                                                 help="The provider's endpoint.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=1)] = None,
    budget: Annotated[float | None, typer.Option("--budget", help="Stop at this cost (USD).")]
    = None,
    approve: ApproveOpt = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    context: Annotated[str | None, typer.Option(
        "--context", help="task_tree, task_list, flat, conversation or none.")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", help="An agent workflow to run instead of the built-in dwim.",
        autocompletion=complete_workflows)] = None,
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w",
                                                   help="Directory to work in.")] = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    no_instructions: Annotated[bool, typer.Option(
        "--no-project-instructions",
        help="Leave AGENTS.md / CLAUDE.md (the workspace's and yours) out of the prompt.")]
    = False,
) -> None:
    """Let a model do TASK with normalize's commands (the dwim workflow)."""
    from normalize.cli.agent import run_agent

    raise typer.Exit(run_agent(_env(), task, model=model, base_url=base_url,
                               max_turns=max_turns, budget=budget, approve=approve,
                               context=context, workflow=workflow, workspace=workspace,
                               json_output=json_output, quiet=quiet, sandbox=sandbox,
                               network=network, project_instructions=not no_instructions))


@app.command()
def resume(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_task_ids)],
    instruction: Annotated[str | None, typer.Argument(
        help="A follow-up instruction: continue a finished or stopped task with it.")] = None,
    answer: Annotated[str | None, typer.Option("--answer", help="Answer the pending question.")]
    = None,
    approve_action: Annotated[bool, typer.Option("--approve", help="Approve the pending action.")]
    = False,
    deny: Annotated[bool, typer.Option("--deny", help="Deny the pending action.")] = False,
    driver: Annotated[str | None, typer.Option("--driver", help=_driver_help())] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="PROVIDER:MODEL for the llm driver (with --driver llm).")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", min=1,
                                                  help="Allow N more turns.")] = None,
    budget: Annotated[float | None, typer.Option("--budget", help="New budget in USD.")] = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Continue a task where it stopped."""
    from normalize.cli.commands import resume_task

    raise typer.Exit(resume_task(_env(), task, answer=answer, approve=approve_action, deny=deny,
                                 driver=driver, max_turns=max_turns, budget=budget,
                                 json_output=json_output, quiet=quiet, model=model,
                                 sandbox=sandbox, network=network, instruction=instruction))


@tasks_app.callback(invoke_without_command=True)
def tasks_list(
    ctx: typer.Context,
    json_output: Annotated[bool, typer.Option("--json", help="JSON, one task per line.")] = False,
) -> None:
    """List tasks, newest first (waiting tasks with their questions)."""
    if ctx.invoked_subcommand is not None:
        return
    from normalize.cli.commands import list_tasks

    raise typer.Exit(list_tasks(_env(), json_output=json_output))


@tasks_app.command("show")
def tasks_show(
    task: Annotated[str, typer.Argument(autocompletion=complete_task_ids)],
    json_output: Annotated[bool, typer.Option("--json", help="The task and its events.")] = False,
) -> None:
    """Show a task and its steps."""
    from normalize.cli.commands import show_task

    raise typer.Exit(show_task(_env(), task, json_output=json_output))


@tasks_app.command("repair")
def tasks_repair(task: Annotated[str | None, typer.Argument(
        autocompletion=complete_task_ids, help="Only this task (default: all).")] = None) -> None:
    """Move damaged task files aside (under each task's lock)."""
    from normalize.cli.repair import repair_tasks

    raise typer.Exit(repair_tasks(_env(), task))


@tasks_app.command("rm")
def tasks_rm(task: Annotated[str, typer.Argument(autocompletion=complete_task_ids)]) -> None:
    """Remove a task and its journal."""
    from normalize.cli.commands import remove_task

    raise typer.Exit(remove_task(_env(), task))


workflows_app = typer.Typer(help="List, show and validate workflow files.",
                            no_args_is_help=True, rich_markup_mode=None)
app.add_typer(workflows_app, name="workflows")
WfWorkspaceOpt = Annotated[Path | None, typer.Option(
    "--workspace", "-w", help="The project whose .normalize/workflows/ to search.")]


@workflows_app.command("list")
def workflows_list(workspace: WfWorkspaceOpt = None,
                   json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The workflows found: the project's, the user's, then the built-ins."""
    from normalize.cli.workflows import list_workflows

    raise typer.Exit(list_workflows(_env(), workspace=workspace, json_output=json_output))


@workflows_app.command("show")
def workflows_show(
    workflow: Annotated[str, typer.Argument(help="A name or a path.",
                                            autocompletion=complete_workflows)],
    var: Annotated[list[str] | None, typer.Option("--var", "-v", help="KEY=VALUE; repeatable.")]
    = None,
    workspace: WfWorkspaceOpt = None,
    json_output: Annotated[bool, typer.Option("--json", help="The spec as JSON.")] = False,
) -> None:
    """The resolved spec of a workflow: its steps or states, variables filled in."""
    from normalize.cli.workflows import show_workflow

    raise typer.Exit(show_workflow(_env(), workflow, var or [], workspace=workspace,
                                   json_output=json_output))


@workflows_app.command("validate")
def workflows_validate(
    files: Annotated[list[str], typer.Argument(help="Workflow files (or names).")],
    workspace: WfWorkspaceOpt = None,
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check workflow files: each is ok or one FILE:LINE:COL line; exit 2 if any fails."""
    from normalize.cli.workflows import validate_workflows

    raise typer.Exit(validate_workflows(_env(), files, workspace=workspace,
                                        json_output=json_output))


TRUST_HELP = """Trust a workflow file's permissions: record its exact content (sha256).

A workflow found by name under the workspace (.normalize/workflows/NAME.toml, the
dwim.toml that `normalize agent` would pick up) may only narrow permissions and does
not replace a built-in workflow of the same name: the model could have written it.
Once trusted it counts as yours; any change to the file untrusts it again. Files
named by path on the command line, your config dir's and the built-in workflows
are trusted already.
"""


@app.command(help=TRUST_HELP)
def trust(
    files: Annotated[list[Path] | None, typer.Argument(help="Workflow files to trust.")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Untrust FILE instead.")] = False,
    show: Annotated[bool, typer.Option("--list", help="The trusted files and whether each "
                                                      "still has its trusted content.")] = False,
) -> None:
    """Trust a workflow file's permissions (its exact content)."""
    from normalize.cli.trust import trust as run_trust

    raise typer.Exit(run_trust(_env(), files or [], remove=remove, show=show))


@app.command()
def plugins(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Everything registered (drivers, steps, conditions, sources, providers, tools)."""
    from normalize.cli.workflows import list_plugins

    raise typer.Exit(list_plugins(_env(), json_output=json_output))


sandbox_app = typer.Typer(help="The sandbox every program normalize starts runs under.",
                          no_args_is_help=True, rich_markup_mode=None)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("check")
def sandbox_check(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """What the sandbox enforces on this machine; exit 1 when it cannot be applied."""
    from normalize.cli.sandbox import check

    raise typer.Exit(check(_env(), json_output=json_output))


VERB_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}
WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", "-w",
                                                   help="Directory to work in.")]
help_app = typer.Typer(help="Reference documentation.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(help_app, name="help")


def _verb(verb: str, ctx: typer.Context, workspace: Path | None, json_output: bool) -> None:
    from normalize.cli.verbs import run_verb

    raise typer.Exit(run_verb(_env(), verb, list(ctx.args), workspace=workspace,
                              json_output=json_output))


@app.command(context_settings=VERB_SETTINGS)
def view(ctx: typer.Context, workspace: WorkspaceOpt = None, json_output: JsonOpt = False) -> None:
    """View PATH, PATH:START-END, PATH/SYMBOL (Class/method) or a directory tree."""
    _verb("view", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS)
def skeleton(ctx: typer.Context, workspace: WorkspaceOpt = None,
             json_output: JsonOpt = False) -> None:
    """Signatures of the classes and functions in PATH, with line numbers."""
    _verb("skeleton", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS)
def grep(ctx: typer.Context, workspace: WorkspaceOpt = None, json_output: JsonOpt = False) -> None:
    """Search PATTERN [PATH] (regex; -i, -l, -w, -F, --max N), respecting .gitignore."""
    _verb("grep", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS)
def analyze(ctx: typer.Context, workspace: WorkspaceOpt = None,
            json_output: JsonOpt = False) -> None:
    """Analyze [PATH] with --health, --complexity, --types or --lint."""
    _verb("analyze", ctx, workspace, json_output)


@help_app.command("commands")
def help_commands(
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown tables.")] = False,
) -> None:
    """The command language: verbs, aliases, forms, bodies."""
    from normalize.cli.verbs import print_commands

    raise typer.Exit(print_commands(_env(), markdown=markdown))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; every error is one line and an exit status."""
    from normalize.cli.complete import lighten_typer
    from normalize.cli.console import Environment, error_line, fail

    lighten_typer()  # no pydantic for absent values, no rich for completion help
    try:
        # standalone_mode=False: click returns a command's `typer.Exit` code instead of exiting
        status = app(args=argv, prog_name="normalize", standalone_mode=False)
    except NormalizeError as exc:
        return fail(Environment(), exc)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        return int(ExitStatus.INTERRUPTED)
    except KeyboardInterrupt:
        return int(ExitStatus.INTERRUPTED)
    except typer.TyperException as exc:
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        return int(getattr(exc, "exit_code", ExitStatus.USAGE))
    except Exception as exc:
        if os.environ.get("NORMALIZE_DEBUG"):
            raise
        error_line(Environment(), f"internal error: {type(exc).__name__}: {exc}",
                   "set NORMALIZE_DEBUG=1 to see the traceback, and please report it")
        return int(ExitStatus.FAILED)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
