"""`normalize batch`: one workflow (or the agent) over many items, as sub-tasks of one parent.

`normalize batch WORKFLOW --items FILE` runs it (the `run` word may be left
out); `batch status BATCH` and `batch collect BATCH -o DIR` watch and gather
it. `resume BATCH` continues a batch whose parent stopped (see
`normalize.batch.parent`).
"""

# No `from __future__ import annotations`: typer reads the annotations at start-up.

from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from normalize.cli.options import (
    ApproveOpt,
    BudgetOpt,
    ConcurrencyOpt,
    GoalOpt,
    ItemBudgetOpt,
    ItemsOpt,
    JsonOpt,
    ModelNoEnvOpt,
    NoNetworkOpt,
    OtelOpt,
    OutputOpt,
    OutputSchemaOpt,
    QuietOpt,
    SandboxOpt,
    StoreOpt,
    VarOpt,
    WorkspaceOpt,
)

if TYPE_CHECKING:
    from normalize.cli.console import Environment


class _DefaultRun(TyperGroup):
    """A group whose first word may be left out: `batch WF …` means `batch run WF …`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


batch_app = typer.Typer(cls=_DefaultRun, rich_markup_mode=None,
                        help="A workflow over many items, each a sub-task.")


def _env() -> "Environment":
    from normalize.cli.console import Environment

    return Environment()


@batch_app.command("run")
def batch_run(
    workflow: Annotated[str, typer.Argument(help="A workflow file, or a name.")],
    items: ItemsOpt,
    items_format: Annotated[str | None, typer.Option(
        "--items-format", metavar="FORMAT", help="jsonl, csv or lines (default: guessed).")]
    = None,
    var: VarOpt = None,
    goal: GoalOpt = "",
    approve: ApproveOpt = None,
    otel: OtelOpt = False,
    executor: Annotated[str, typer.Option("--executor", help="local (default) or ray.")]
    = "local",
    address: Annotated[str | None, typer.Option(
        "--address", envvar="RAY_ADDRESS", help="The Ray cluster (with --executor ray).")]
    = None,
    concurrency: ConcurrencyOpt = 4,
    budget: BudgetOpt = None,
    item_budget: ItemBudgetOpt = None,
    max_attempts: Annotated[int, typer.Option(
        "--max-attempts", min=1, help="Runs of one item whose process or worker died.")] = 3,
    item_cpus: Annotated[float, typer.Option(
        "--item-cpus", min=0.01, help="CPUs one item asks the cluster for (--executor ray).")]
    = 1.0,
    item_memory: Annotated[int | None, typer.Option(
        "--item-memory", metavar="MB", min=1,
        help="Memory one item asks the cluster for (--executor ray).")] = None,
    on_item_error: Annotated[str | None, typer.Option(
        "--on-item-error", metavar="WHAT", help="continue (default) or stop.")] = None,
    item_workspace: Annotated[str | None, typer.Option(
        "--item-workspace", metavar="WHERE",
        help="Each item's workspace: dir:PATH, clone:REPO or copy (default: the workflow's "
        "`workspace`, else copy).")] = None,
    model: ModelNoEnvOpt = None,
    sandbox: SandboxOpt = None,
    no_network: NoNetworkOpt = False,
    workspace: WorkspaceOpt = None,
    output_schema: OutputSchemaOpt = None,
    store: StoreOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run WORKFLOW once per item (each a sub-task)."""
    from normalize.cli import launching

    raise typer.Exit(launching.launch(_env(), launching.Batch(
        workflow=workflow, items=items or "", items_format=items_format,
        variables=tuple(var or ()), goal=goal, approve=approve, otel=otel, executor=executor,
        address=address, concurrency=concurrency, budget=budget, item_budget=item_budget,
        max_attempts=max_attempts, item_cpus=item_cpus, item_memory=item_memory,
        on_item_error=on_item_error, item_workspace=item_workspace, model=model,
        sandbox=sandbox, no_network=no_network, workspace=workspace,
        output_schema=output_schema, store=store, json_output=json_output, quiet=quiet)))


@batch_app.command("status")
def batch_status(
    batch: Annotated[str, typer.Argument(help="A batch id (or a unique prefix).")],
    store: StoreOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Where each item of a batch stands."""
    from normalize.cli import batching

    raise typer.Exit(batching.status(_env(), batch, store, json_output=json_output))


@batch_app.command("collect")
def batch_collect(
    batch: Annotated[str, typer.Argument(help="A batch id (or a unique prefix).")],
    output: OutputOpt,
    store: StoreOpt = None,
) -> None:
    """Gather every item's diff and result in the --output directory."""
    from normalize.cli import batching

    raise typer.Exit(batching.collect_into(_env(), batch, output, store))
