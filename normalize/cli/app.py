"""The `normalize` command line: a thin layer over the library.

Heavy modules (the anthropic SDK, httpx, prompt-toolkit) are imported only
inside the commands that need them, so `--help` and completion start fast.
"""

# No `from __future__ import annotations` here: typer reads every command's
# annotations at start-up, and string annotations cost it an eval each (~6 ms
# of `--help`). Annotations in this module must be valid at runtime.

import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from normalize.cli.options import (
    ALL_HOSTS,
    AllOpt,
    ApproveOpt,
    BaseUrlOpt,
    BudgetOpt,
    CommitOpt,
    ConcurrencyOpt,
    DryRunOpt,
    GoalOpt,
    ItemBudgetOpt,
    ItemsOpt,
    JsonOpt,
    MaxTurnsOpt,
    ModelNoEnvOpt,
    ModelOpt,
    NetworkOpt,
    NoMemoryOpt,
    NoNetworkOpt,
    OtelOpt,
    OutputOpt,
    OutputRetriesOpt,
    OutputSchemaOpt,
    QuietOpt,
    SandboxOpt,
    StoreOpt,
    VarOpt,
    WorkspaceLongOpt,
    WorkspaceOpt,
)
from normalize.errors import ExitStatus, NormalizeError

if TYPE_CHECKING:
    from normalize.cli.console import Environment

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

from normalize.cli.batch import batch_app  # noqa: E402 (the group beside the others)

app.add_typer(batch_app, name="batch")

def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("normalize")
        except PackageNotFoundError:
            number = "unknown"
        sys.stdout.write(f"normalize {number}\n")
        raise typer.Exit(0)


@app.callback()
def _main(
    show_version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version, help="Print the version and exit.")]
    = False,
) -> None:
    """Automate work on a codebase through pluggable drivers: workflows, state machines, models
    and people."""


def _env() -> "Environment":
    from normalize.cli.console import Environment

    return Environment()


def _driver_help() -> str:
    """The --driver help with every registered driver (entry points read, nothing imported)."""
    from normalize.contract.builtin import BUILTIN_DRIVERS
    from normalize.plugins import advertised_names

    names = sorted({*BUILTIN_DRIVERS, *advertised_names("normalize.drivers")})
    return f"Continue with another driver: {', '.join(names)}."


def complete_task_ids(incomplete: str) -> list[str]:
    """Task ids for shell completion (reads file names only)."""
    from normalize.cli.complete import task_ids

    return task_ids(incomplete)


def complete_resumable(incomplete: str) -> list[str]:
    """Ids of the tasks that can be resumed (not done), for shell completion."""
    from normalize.cli.complete import resumable_task_ids

    return resumable_task_ids(incomplete)


def complete_drivers(incomplete: str) -> list[str]:
    """Driver names for shell completion."""
    from normalize.cli.complete import drivers

    return drivers(incomplete)


def complete_workflows(incomplete: str) -> list[str]:
    """Workflow names and `.toml` files for shell completion."""
    from normalize.cli.complete import workflows

    return workflows(incomplete)


def bare_network(argv: list[str]) -> list[str]:
    """`argv` with a bare `--network` (nothing or an option after it) given the value `*`."""
    out: list[str] = []
    for index, word in enumerate(argv):
        if word == "--":
            return [*out, *argv[index:]]
        out.append(word)
        following = argv[index + 1] if index + 1 < len(argv) else "-"
        if word == "--network" and following.startswith("-"):
            out.append(ALL_HOSTS)
    return out


@app.command()
def run(
    workflow: Annotated[str, typer.Argument(help="A workflow file, or a name (health, check, …).",
                                            autocompletion=complete_workflows)],
    var: VarOpt = None,
    goal: GoalOpt = "",
    workspace: WorkspaceOpt = None,
    max_turns: MaxTurnsOpt = None,
    approve: ApproveOpt = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    no_network: NoNetworkOpt = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    commit: CommitOpt = False,
    output_schema: OutputSchemaOpt = None,
    output_retries: OutputRetriesOpt = None,
    otel: OtelOpt = False,
    no_memory: NoMemoryOpt = False,
) -> None:
    """Run a workflow file (steps, a state machine, or a model loop)."""
    from normalize.cli import launching

    raise typer.Exit(launching.launch(_env(), launching.Run(
        workflow=workflow, variables=tuple(var or ()), goal=goal, workspace=workspace,
        max_turns=max_turns, approve=approve, sandbox=sandbox, network=tuple(network or ()),
        no_network=no_network, model=model, base_url=base_url, dry_run=dry_run,
        json_output=json_output, quiet=quiet, commit=commit, output_schema=output_schema,
        output_retries=output_retries, otel=otel, memory=not no_memory)))


@app.command()
def agent(
    task: Annotated[str, typer.Argument(
        help="What to do, in plain words (at a terminal, left out: asked for; `-`: read "
        "from stdin).")] = "",
    task_file: Annotated[Path | None, typer.Option(
        "--task-file", metavar="FILE", help="Read the task from FILE.")] = None,
    output_schema: OutputSchemaOpt = None,
    output_retries: OutputRetriesOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    max_turns: MaxTurnsOpt = None,
    budget: BudgetOpt = None,
    approve: ApproveOpt = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    no_network: NoNetworkOpt = False,
    context: Annotated[str | None, typer.Option(
        "--context", help="task_tree, task_list, flat, conversation or none.")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", help="An agent workflow to run instead of the built-in dwim.",
        autocompletion=complete_workflows)] = None,
    workspace: WorkspaceOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    no_instructions: Annotated[bool, typer.Option(
        "--no-project-instructions",
        help="Leave AGENTS.md / CLAUDE.md (the workspace's and yours) out of the prompt.")]
    = False,
    repo_map: Annotated[int | None, typer.Option(
        "--repo-map", metavar="TOKENS",
        help="Put a repo map of about TOKENS tokens in the cached prompt (0: none).")] = None,
    commit: CommitOpt = False,
    attempts: Annotated[int | None, typer.Option(
        "--attempts", metavar="N",
        help="Best-of-N: N isolated attempts side by side (with --model A,B,C the models in "
        "turn); the best is applied, the others kept for inspection.")] = None,
    pick: Annotated[str | None, typer.Option(
        "--pick", metavar="COMMAND",
        help="With --attempts: run COMMAND (sandboxed) in each finished attempt's copy. The "
        "best attempt ended done and its COMMAND exited 0; among those the smallest diff, "
        "then the first. An attempt that changed what COMMAND reads (a file it names, "
        "conftest.py, pytest.ini, pyproject.toml…, a test file it started with) is "
        "disqualified.")] = None,
    otel: OtelOpt = False,
    harness: Annotated[str | None, typer.Option(
        "--harness", help="Another agent takes the turns: claude, codex or aider "
        "(in normalize's sandbox; docs/harnesses.md), or acp:COMMAND, any ACP agent whose "
        "every file and command is a normalize action (docs/acp.md).")] = None,
    items: ItemsOpt = None,
    item_budget: ItemBudgetOpt = None,
    concurrency: ConcurrencyOpt = 4,
    no_memory: NoMemoryOpt = False,
) -> None:
    """A model works on TASK with normalize's commands.

    It runs the dwim workflow (or, with --harness, another agent's CLI).
    """
    from normalize.cli import launching

    raise typer.Exit(launching.launch(_env(), launching.Agent(
        task=task, task_file=task_file, output_schema=output_schema,
        output_retries=output_retries, model=model, base_url=base_url, max_turns=max_turns,
        budget=budget, approve=approve, sandbox=sandbox, network=tuple(network or ()),
        no_network=no_network, context=context, workflow=workflow, workspace=workspace,
        json_output=json_output, quiet=quiet, project_instructions=not no_instructions,
        repo_map=repo_map, commit=commit, attempts=attempts, pick=pick, otel=otel,
        harness=harness, items=items, item_budget=item_budget, concurrency=concurrency,
        memory=not no_memory)))


@app.command()
def resume(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_resumable)],
    instruction: Annotated[str | None, typer.Argument(
        help="A follow-up instruction: continue a finished or stopped task with it.")] = None,
    answer: Annotated[str | None, typer.Option(
        "--answer", metavar="TEXT", help="Answer what the task waits for: a question's TEXT, "
        "or yes|no for a pending approval.")] = None,
    approve: ApproveOpt = None,
    driver: Annotated[str | None, typer.Option(
        "--driver", help=_driver_help(),
        autocompletion=complete_drivers)] = None,
    model: ModelNoEnvOpt = None,
    base_url: BaseUrlOpt = None,
    max_turns: MaxTurnsOpt = None,
    budget: BudgetOpt = None,
    sandbox: SandboxOpt = None,
    network: NetworkOpt = None,
    no_network: NoNetworkOpt = False,
    rewind: Annotated[int | None, typer.Option(
        "--rewind", min=0, help="First put files and task state back to step N.")] = None,
    fork: Annotated[bool, typer.Option(
        "--fork", help="Continue a new task (its child) in a copy of the workspace, from its "
        "last step or --rewind N; the task itself is left as it is.")] = False,
    in_place: Annotated[bool, typer.Option(
        "--in-place", help="With --fork: the new task works in the task's own workspace (with "
        "--rewind N, its files put back to step N first), not a copy.")] = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    otel: OtelOpt = False,
    no_memory: NoMemoryOpt = False,
    store: StoreOpt = None,
) -> None:
    """Continue a task where it stopped."""
    from normalize.cli import launching

    raise typer.Exit(launching.launch(_env(), launching.Resume.of(
        task, instruction=instruction, fork=fork, rewind=rewind, driver=driver, answer=answer,
        in_place=in_place, approve=approve, model=model, base_url=base_url,
        max_turns=max_turns, budget=budget, sandbox=sandbox, network=tuple(network or ()),
        no_network=no_network, json_output=json_output, quiet=quiet, otel=otel,
        memory=not no_memory, store=store)))


@app.command()
def diff(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_task_ids)],
    step: Annotated[int | None, typer.Argument(help="Only this step's changes.")] = None,
    stat: Annotated[bool, typer.Option("--stat", help="Files and +/- lines only.")] = False,
    json_output: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """What a task (or one STEP of it) changed, as a diff.

    STEP is a `#N` of `tasks show`; `--stat` counts lines per file, `--json` for machines.
    """
    from normalize.cli.changes import show_diff

    if store is not None:
        from normalize.cli.batching import diff_remote

        raise typer.Exit(diff_remote(_env(), task, store))
    raise typer.Exit(show_diff(_env(), task, step, stat=stat, json_output=json_output))


@app.command()
def commit(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_task_ids)],
    branch: Annotated[str | None, typer.Option(
        "--branch", help="The branch to make (default normalize/ID8).")] = None,
    message: Annotated[str | None, typer.Option(
        "--message", "-m", help="The commit message (default: the task's summary).")] = None,
    push: Annotated[str | None, typer.Option(
        "--push", metavar="REMOTE", help="Push the branch to this remote.")] = None,
    no_verify: Annotated[bool, typer.Option(
        "--no-verify", help="Skip the pre-commit and commit-msg hooks.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Commit a task's change to a new branch of your repository."""
    from normalize.cli.commit import commit_branch

    raise typer.Exit(commit_branch(_env(), task, branch=branch, message=message, push=push,
                                   no_verify=no_verify, json_output=json_output))


@app.command()
def undo(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_task_ids)],
    to: Annotated[int | None, typer.Option("--to", min=0,
                                           help="Back to after step N (default: before the task).")]
    = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Also restore files a person changed since the task.")] = False,
) -> None:
    """Put the files a task changed back as they were."""
    from normalize.cli.changes import undo_changes

    raise typer.Exit(undo_changes(_env(), task, to, force=force))


@app.command()
def report(
    task: Annotated[str, typer.Argument(help="A task id, a unique prefix, or `last`.",
                                        autocompletion=complete_task_ids)],
    output: OutputOpt = None,
    store: StoreOpt = None,
) -> None:
    """Write a task's report: one self-contained HTML file."""
    if store is not None:
        from normalize.cli.batching import report_remote

        raise typer.Exit(report_remote(_env(), task, store, output))
    from normalize.cli.changes import write_report

    raise typer.Exit(write_report(_env(), task, output))


@tasks_app.callback(invoke_without_command=True)
def tasks_list(
    ctx: typer.Context,
    json_output: JsonOpt = False,
    limit: Annotated[int | None, typer.Option(
        "--limit", "-n", min=1,
        help="Show the newest N tasks (the table's default: 50; --json: all).")] = None,
    show_all: AllOpt = False,
    workspace: WorkspaceOpt = None,
    flat: Annotated[bool, typer.Option(
        "--flat", help="Sub-tasks in their own place, not indented under their parent.")]
    = False,
) -> None:
    """List tasks, the last changed first (waiting tasks with their questions)."""
    if ctx.invoked_subcommand is not None:
        return
    from normalize.cli.listing import list_tasks

    raise typer.Exit(list_tasks(_env(), json_output=json_output, limit=limit,
                                show_all=show_all, flat=flat,
                                workspace=None if workspace is None else str(workspace.resolve())))


@tasks_app.command("show")
def tasks_show(
    task: Annotated[str, typer.Argument(autocompletion=complete_task_ids)],
    json_output: JsonOpt = False,
    full: Annotated[bool, typer.Option("--full", help="Each step's whole output.")] = False,
    store: StoreOpt = None,
) -> None:
    """Show a task and its steps, each with its output."""
    from normalize.cli.commands import show_task

    if store is not None:
        from normalize.cli.batching import show_remote

        raise typer.Exit(show_remote(_env(), task, store, json_output=json_output))
    raise typer.Exit(show_task(_env(), task, json_output=json_output, full=full))


@tasks_app.command("clean")
def tasks_clean(dry_run: DryRunOpt = False) -> None:
    """Remove the isolated copies no task needs."""
    from normalize.cli.listing import clean_copies

    raise typer.Exit(clean_copies(_env(), dry_run=dry_run))


@tasks_app.command("repair")
def tasks_repair(task: Annotated[str | None, typer.Argument(
        autocompletion=complete_task_ids, help="Only this task (default: all).")] = None) -> None:
    """Move damaged task files aside (under each task's lock)."""
    from normalize.cli.repair import repair_tasks

    raise typer.Exit(repair_tasks(_env(), task))


@tasks_app.command("rm")
def tasks_rm(
    task: Annotated[str | None, typer.Argument(autocompletion=complete_task_ids)] = None,
    status: Annotated[str | None, typer.Option(
        "--status", help="Instead of TASK: every task in this status (interrupted, failed, "
        "done, …).")] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Remove a task (or every task in a --status) and its journal."""
    from normalize.cli.commands import remove_task
    from normalize.cli.listing import remove_tasks

    if status is not None or task is None:
        raise typer.Exit(remove_tasks(_env(), task, status, workspace))
    raise typer.Exit(remove_task(_env(), task))


workflows_app = typer.Typer(help="List, show and validate workflow files.",
                            no_args_is_help=True, rich_markup_mode=None)
app.add_typer(workflows_app, name="workflows")


@workflows_app.command("list")
def workflows_list(workspace: WorkspaceOpt = None,
                   json_output: JsonOpt = False) -> None:
    """The workflows found, and where.

    The project's, the user's, then the built-ins.
    """
    from normalize.cli.workflows import list_workflows

    raise typer.Exit(list_workflows(_env(), workspace=workspace, json_output=json_output))


@workflows_app.command("show")
def workflows_show(
    workflow: Annotated[str, typer.Argument(help="A name or a path.",
                                            autocompletion=complete_workflows)],
    var: VarOpt = None,
    workspace: WorkspaceOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """A workflow as it will run.

    Its steps or states, with the variables filled in.
    """
    from normalize.cli.workflows import show_workflow

    raise typer.Exit(show_workflow(_env(), workflow, var or [], workspace=workspace,
                                   json_output=json_output))


@workflows_app.command("validate")
def workflows_validate(
    files: Annotated[list[str], typer.Argument(help="Workflow files (or names).")],
    workspace: WorkspaceOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check workflow files.

    Each is ok or one FILE:LINE:COL line; exit 2 if any fails.
    """
    from normalize.cli.workflows import validate_workflows

    raise typer.Exit(validate_workflows(_env(), files, workspace=workspace,
                                        json_output=json_output))


TRUST_HELP = """Trust a workflow file's permissions.

Records its exact content (sha256). A workflow found by name under the workspace
(.normalize/workflows/NAME.toml, the dwim.toml that `normalize agent` would pick up) may
only narrow permissions and does not replace a built-in workflow of the same name: the
model could have written it. Once trusted it counts as yours; any change to the file
untrusts it again. Files named by path on the command line, your config dir's and the
built-in workflows are trusted already.
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
def plugins(json_output: JsonOpt = False) -> None:
    """Everything registered, and where it came from.

    Drivers, step kinds, conditions, sources, providers, context strategies and tools.
    """
    from normalize.cli.workflows import list_plugins

    raise typer.Exit(list_plugins(_env(), json_output=json_output))


sandbox_app = typer.Typer(help="The sandbox every program normalize starts runs under.",
                          no_args_is_help=True, rich_markup_mode=None)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("check")
def sandbox_check(json_output: JsonOpt = False) -> None:
    """What the sandbox enforces on this machine.

    Exit 1 when it cannot be applied.
    """
    from normalize.cli.sandbox import check

    raise typer.Exit(check(_env(), json_output=json_output))


@app.command("mcp")
def mcp_serve(
    workspace: WorkspaceOpt = None,
    allow_run: Annotated[bool, typer.Option(
        "--allow-run", help="Also serve the tools that start and answer this workspace's "
                            "tasks.")] = False,
    allow_approve_all: Annotated[bool, typer.Option(
        "--allow-approve-all",
        help="Let answer_task approve what needs the person too: network, --sandbox off, "
             "destructive commands, other MCP servers' tools (needs --allow-run).")] = False,
) -> None:
    """Serve the code tools and tasks over MCP (stdio).

    normalize's code tools and this workspace's tasks, for Claude Code, Codex and others.
    """
    from normalize.cli.mcp import serve_mcp

    raise typer.Exit(serve_mcp(_env(), workspace=workspace, allow_run=allow_run,
                               allow_approve_all=allow_approve_all))


@app.command("acp")
def acp_serve(
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    approve: ApproveOpt = None,
    sandbox: SandboxOpt = None,
) -> None:
    """An Agent Client Protocol agent on stdio, for editors.

    Each session is a normalize task: durable, sandboxed, resumable (docs/acp.md).
    """
    from normalize.cli.acp import serve_acp

    raise typer.Exit(serve_acp(_env(), model=model, base_url=base_url, approve=approve,
                               sandbox=sandbox))


VERB_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}
help_app = typer.Typer(help="Reference documentation.", rich_markup_mode=None)
app.add_typer(help_app, name="help")
HELP_TOPICS = {
    "commands": "the command language: verbs, aliases, forms, bodies",
}


@help_app.callback(invoke_without_command=True)
def help_topics(ctx: typer.Context) -> None:
    """Reference documentation: `normalize help TOPIC`."""
    if ctx.invoked_subcommand is not None:
        return
    lines = ["normalize help TOPIC — the topics:",
             *(f"  {name:<10} {what}" for name, what in HELP_TOPICS.items()),
             "Every command has its own --help (normalize run --help, …)."]
    sys.stdout.write("\n".join(lines) + "\n")
    raise typer.Exit(0)


def _verb(verb: str, ctx: typer.Context, workspace: Path | None, json_output: bool) -> None:
    from normalize.cli.verbs import run_verb

    raise typer.Exit(run_verb(_env(), verb, list(ctx.args), workspace=workspace,
                              json_output=json_output))


@app.command(context_settings=VERB_SETTINGS, options_metavar="[OPTIONS] PATH[:START-END|/SYMBOL]")
def view(ctx: typer.Context, workspace: WorkspaceOpt = None,
         json_output: JsonOpt = False) -> None:
    """View a file, lines, a symbol or a directory tree.

    PATH, PATH:START-END, PATH/SYMBOL (Class/method), or a directory.
    """
    _verb("view", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS, options_metavar="[OPTIONS] PATH")
def skeleton(ctx: typer.Context, workspace: WorkspaceOpt = None,
             json_output: JsonOpt = False) -> None:
    """The outline of PATH: signatures with line numbers.

    The classes and functions of a file, or of every file under a directory.
    """
    _verb("skeleton", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS,
             options_metavar="[OPTIONS] PATTERN [PATH] [-i|-l|-w/--word|-F|--max N]")
def grep(ctx: typer.Context, workspace: WorkspaceLongOpt = None,
         json_output: JsonOpt = False) -> None:
    """Search for PATTERN (a regex), respecting .gitignore.

    grep PATTERN [PATH] with -i, -l, -w/--word, -F, --max N. Exits 1 when nothing matches,
    2 on a bad pattern or path.
    """
    _verb("grep", ctx, workspace, json_output)


@app.command(context_settings=VERB_SETTINGS,
             options_metavar="[PATH] [--health|--complexity|--types|--lint]")
def analyze(ctx: typer.Context, workspace: WorkspaceOpt = None,
            json_output: JsonOpt = False) -> None:
    """Analyze [PATH] with --health, --complexity, --types or --lint."""
    _verb("analyze", ctx, workspace, json_output)


@app.command("map")
def repo_map(
    path: Annotated[str | None, typer.Argument(help="A directory or file (default: all).")] = None,
    tokens: Annotated[int, typer.Option("--tokens", help="The map's size in tokens.")] = 1024,
    workspace: WorkspaceOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The definitions other files use most, ranked.

    Ranked by the files that use them (PageRank), fitted to --tokens.
    """
    from normalize.cli.map import run_map

    raise typer.Exit(run_map(_env(), path, tokens=tokens, workspace=workspace,
                             json_output=json_output))


@help_app.command("commands")
def help_commands(
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown tables.")] = False,
) -> None:
    """The command language: verbs, aliases, forms, bodies."""
    from normalize.cli.verbs import print_commands

    raise typer.Exit(print_commands(_env(), markdown=markdown))


# -- memory and skills (issue #38): one block ------------------------------------------------

memory_app = typer.Typer(help="Review what the agent learnt: the inbox, accepted entries.",
                         no_args_is_help=True, rich_markup_mode=None)
app.add_typer(memory_app, name="memory")
MemIdsArg = Annotated[list[str] | None, typer.Argument(metavar="ID...", help="Entry ids.")]


@memory_app.command("list")
def memory_list(workspace: WorkspaceOpt = None,
                every: AllOpt = False,
                json_output: JsonOpt = False) -> None:
    """The accepted entries (stale ones marked)."""
    from normalize.cli.memory import memory_list as listing

    raise typer.Exit(listing(_env(), workspace=workspace, every=every, json_output=json_output))


@memory_app.command("show")
def memory_show(entry: Annotated[str, typer.Argument(metavar="ID")],
                workspace: WorkspaceOpt = None,
                json_output: JsonOpt = False) -> None:
    """One entry: its text, where it came from, its files."""
    from normalize.cli.memory import memory_show as show

    raise typer.Exit(show(_env(), entry, workspace=workspace, json_output=json_output))


@memory_app.command("inbox")
def memory_inbox(workspace: WorkspaceOpt = None,
                 json_output: JsonOpt = False) -> None:
    """The proposed entries, each with where it came from."""
    from normalize.cli.memory import memory_inbox as inbox

    raise typer.Exit(inbox(_env(), workspace=workspace, json_output=json_output))


@memory_app.command("accept")
def memory_accept(entries: MemIdsArg = None, workspace: WorkspaceOpt = None,
                  every: AllOpt = False,
                  user: Annotated[bool, typer.Option(
                      "--user", help="Into your own memory (every project), not this "
                                     "project's.")] = False) -> None:
    """Accept entries: later tasks may recall them."""
    from normalize.cli.memory import memory_set_state

    raise typer.Exit(memory_set_state(_env(), entries or [], "accepted", workspace=workspace,
                                      user=user, every=every))


@memory_app.command("reject")
def memory_reject(entries: MemIdsArg = None, workspace: WorkspaceOpt = None,
                  every: AllOpt = False
                  ) -> None:
    """Reject entries: never recalled, never proposed again."""
    from normalize.cli.memory import memory_set_state

    raise typer.Exit(memory_set_state(_env(), entries or [], "rejected", workspace=workspace,
                                      every=every))


@memory_app.command("edit")
def memory_edit(entry: Annotated[str, typer.Argument(metavar="ID")],
                text: Annotated[str, typer.Argument(help="The entry's new text.")],
                workspace: WorkspaceOpt = None) -> None:
    """Give an entry new text."""
    from normalize.cli.memory import memory_edit as edit

    raise typer.Exit(edit(_env(), entry, text, workspace=workspace))


@memory_app.command("forget")
def memory_forget(entries: MemIdsArg = None, workspace: WorkspaceOpt = None) -> None:
    """Delete entries."""
    from normalize.cli.memory import memory_forget as forget

    raise typer.Exit(forget(_env(), entries or [], workspace=workspace))


skills_app = typer.Typer(help="Agent Skills a run here would use; check SKILL.md files.",
                         no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(skills_app, name="skills")


@skills_app.command("list")
def skills_list(workspace: WorkspaceOpt = None,
                json_output: JsonOpt = False) -> None:
    """The skills found: the project's (when trusted) and yours."""
    from normalize.cli.skills import skills_list as listing

    raise typer.Exit(listing(_env(), workspace=workspace, json_output=json_output))


@skills_app.command("show")
def skills_show(name: Annotated[str, typer.Argument(metavar="NAME")],
                workspace: WorkspaceOpt = None) -> None:
    """A skill's description, instructions and resources."""
    from normalize.cli.skills import skills_show as show

    raise typer.Exit(show(_env(), name, workspace=workspace))


@skills_app.command("check")
def skills_check(paths: Annotated[list[Path] | None, typer.Argument(
                     metavar="[PATH]...", help="A skill directory, its SKILL.md, or a "
                     "directory of skills (default: every skill found here).")] = None,
                 workspace: WorkspaceOpt = None) -> None:
    """Check skills as the specification requires (FILE:LINE problems)."""
    from normalize.cli.skills import skills_check as run_check

    raise typer.Exit(run_check(_env(), paths or [], workspace=workspace))
# -- end of memory and skills --------------------------------------------------------------


def main(argv: list[str] | None = None, *, command: Callable[..., object] = app) -> int:
    """Entry point: run the app; every error is one line and an exit status. `command` is
    the app's click command built before (a warm worker's: building it costs ~100 ms)."""
    from normalize.cli.complete import COMPLETE_VAR, lighten_typer

    lighten_typer()  # no pydantic for absent values, no rich for completion help
    for stream in (sys.stdout, sys.stderr):  # an ascii terminal gets `\u2713`, not a crash
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        if COMPLETE_VAR not in os.environ:  # (a TAB press reads no task, and stays light)
            from normalize.homes import settle_homes

            settle_homes()  # a relative NORMALIZE_HOME means the directory it meant here
        # standalone_mode=False: click returns a command's `typer.Exit` code instead of exiting
        args = bare_network(sys.argv[1:] if argv is None else argv)
        status = command(args=args, prog_name="normalize", standalone_mode=False)
    except BaseException as exc:  # each kind its status, or raised again (_ended)
        return _ended(exc)
    finally:
        if argv is None:  # the process ends next: skip the full collection at exit
            gc.freeze()  # (half a second with the SDKs loaded: Ctrl-C must stop in one)
    return status if isinstance(status, int) else 0


def _ended(exc: BaseException) -> int:
    """The exit status of a command that raised `exc`: one line for an error; raised again
    when it is not ours to end (a SystemExit, a bug under NORMALIZE_DEBUG)."""
    from normalize.cli.console import Environment, fail

    match exc:
        case NormalizeError():
            return fail(Environment(), exc)
        case typer.Exit():
            return int(exc.exit_code or 0)
        case typer.Abort() | KeyboardInterrupt():
            return int(ExitStatus.INTERRUPTED)
        case SystemExit() if reader_left():  # `normalize plugins | head -1`: it had enough
            return int(ExitStatus.DONE)
        case typer.TyperException():
            return _typer_error(exc)
        case Exception():
            return _internal_error(exc)
    raise exc


def _typer_error(exc: typer.TyperException) -> int:
    """A bad command line (said with a hint), or another of click's own errors (shown)."""
    if hasattr(exc, "ctx") and hasattr(exc, "format_message"):  # a bad command line
        return usage_error(exc)
    show = getattr(exc, "show", None)
    if show is not None:
        show()
    return int(getattr(exc, "exit_code", ExitStatus.USAGE))


def _internal_error(exc: Exception) -> int:
    """A bug: one line asking for a report (the traceback with NORMALIZE_DEBUG=1)."""
    from normalize.cli.console import Environment, error_line

    if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
        # a Ctrl-C while a class was being made (Python 3.11 wraps it in a RuntimeError)
        return int(ExitStatus.INTERRUPTED)
    if os.environ.get("NORMALIZE_DEBUG"):
        raise exc
    error_line(Environment(), f"internal error: {type(exc).__name__}: {exc}",
               "set NORMALIZE_DEBUG=1 to see the traceback, and please report it")
    return int(ExitStatus.FAILED)


def reader_left() -> bool:
    """Whether click stopped a command because its stdout's reader went away (EPIPE).

    Only commands that just print get there: a run stops itself on a closed stdout
    (`write_out`) and exits 130. Click then wraps the streams to mute their last flush.
    """
    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def usage_error(exc: Any) -> int:
    """A bad command line: the error (with any "did you mean") on the first line, then a hint."""
    from normalize.cli.console import Environment, error_line

    if type(exc).__name__ == "NoArgsIsHelpError":  # `normalize` alone: the help, no error
        sys.stderr.write(f"{exc.ctx.get_help() if exc.ctx is not None else ''}\n")
        return int(ExitStatus.USAGE)
    text = str(exc.format_message()).strip()
    text = text[:1].lower() + text[1:]
    command = exc.ctx.command_path if exc.ctx is not None else "normalize"
    hint = f"{command} --help shows the usage"
    if "'--approve' requires an argument" in text:
        hint = ("--approve takes a MODE (ask, auto, yes, never); a pending approval is answered "
                "with --answer yes|no")
    error_line(Environment(), text, hint)
    return int(exc.exit_code or ExitStatus.USAGE)


if __name__ == "__main__":
    sys.exit(main())
