"""Every option two commands share, declared once: one spelling, one type, one help.

A command takes a shared flag only from here (`tests/cli/test_options_once.py`
walks every command and fails on a flag declared twice, or on two helps or types
for one flag). A flag one command alone takes may stay beside that command.
Where a flag's meaning leans on its command (`--json`, `--workspace`), the help
says what it does and the command's own description says the rest.
"""

# No `from __future__ import annotations`: typer reads the annotations at start-up.

from pathlib import Path
from typing import Annotated

import typer

ALL_HOSTS = "*"
"""The value a bare `--network` gets: every host."""

_WORKSPACE_HELP = ("The project directory: where to work, or whose tasks, memory, skills or "
                   "workflows (default: the current directory; tasks: every directory).")
MODEL_HELP = ("PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, "
              "ollama:llama3.1, scripted:FILE, replay:TASKID.")

# -- what a run may do ---------------------------------------------------------------------
ApproveOpt = Annotated[str | None, typer.Option(
    "--approve", metavar="MODE",
    help="Approval mode for side effects: ask, auto, yes, never (a batch's items: auto, yes, "
         "never).")]
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", metavar="MODE",
    help="What programs may touch: workspace (default), read-only, off.")]
NetworkOpt = Annotated[list[str] | None, typer.Option(
    "--network", metavar="[HOST]",
    help="Let programs reach HOST (repeatable; *.example.com too) through normalize's proxy; "
         "alone, every host (leaves the sandbox: asks).")]
NoNetworkOpt = Annotated[bool, typer.Option("--no-network", help="No network for programs.")]
MaxTurnsOpt = Annotated[int | None, typer.Option(
    "--max-turns", min=1, help="Stop after N turns in all (the task's total, not N more).")]
BudgetOpt = Annotated[float | None, typer.Option(
    "--budget", metavar="USD",
    help="Stop when the model cost reaches USD: the task's, or with items the whole batch's.")]
NoMemoryOpt = Annotated[bool, typer.Option(
    "--no-memory", help="This run neither recalls memory nor proposes any.")]
CommitOpt = Annotated[bool, typer.Option(
    "--commit", help="When the task is done, make a branch with its change (normalize commit).")]
OtelOpt = Annotated[bool, typer.Option(
    "--otel", help="Export OpenTelemetry traces (to OTEL_EXPORTER_OTLP_ENDPOINT, else "
    "localhost:4318); on by itself when that variable is set.")]

# -- the model -------------------------------------------------------------------------------
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", envvar="NORMALIZE_MODEL",
                                              help=MODEL_HELP)]
ModelNoEnvOpt = Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP)]
"""`--model` where NORMALIZE_MODEL must not pick one: a resumed task keeps its own."""
BaseUrlOpt = Annotated[str | None, typer.Option(
    "--base-url", help="Base URL of the model server (a resumed task keeps it for its next "
                       "runs).")]
OutputSchemaOpt = Annotated[Path | None, typer.Option(
    "--output-schema", metavar="FILE",
    help="A JSON Schema the final result must meet (the model ends with `done` and the JSON; "
         "a batch's items each, collected as JSONL and CSV).")]
OutputRetriesOpt = Annotated[int | None, typer.Option(
    "--output-retries", metavar="N", min=0, max=20,
    help="How often an invalid result goes back to the model (default 2).")]

# -- what a run is given ---------------------------------------------------------------------
VarOpt = Annotated[list[str] | None, typer.Option("--var", "-v", help="KEY=VALUE; repeatable.")]
GoalOpt = Annotated[str, typer.Option(
    "--goal", help="The task text ({task}); a batch's may use {item.NAME}.")]
ItemsOpt = Annotated[str | None, typer.Option(
    "--items", metavar="FILE|-",
    help="Run once per item (a batch): JSON lines, CSV with a header, or plain lines "
         "({item.NAME} in the task or workflow; a plain line is {item.line}).")]
ConcurrencyOpt = Annotated[int, typer.Option(
    "--concurrency", min=1, help="A batch's items in flight at once.")]
ItemBudgetOpt = Annotated[float | None, typer.Option(
    "--item-budget", metavar="USD", help="Each item's model cost (a batch).")]
WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", "-w", help=_WORKSPACE_HELP)]
WorkspaceLongOpt = Annotated[Path | None, typer.Option("--workspace", help=_WORKSPACE_HELP)]
"""`--workspace` without `-w`: grep's -w is --word, as in grep and rg."""

# -- what a command shows --------------------------------------------------------------------
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="JSON on stdout, for machines: a run's events, one to a line; a verb's "
                   "result, one JSON object; else what the command shows.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the final summary.")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Only say what would be done (run: the plan); change nothing.")]
AllOpt = Annotated[bool, typer.Option(
    "--all", "-a", help="All of them, not the default few: every task, every entry's state, "
                        "the whole inbox.")]
StoreOpt = Annotated[str | None, typer.Option(
    "--store", metavar="URL",
    help="A batch's store: batch run publishes to it (s3://…, gs://…) and, at s3:// or "
         "file://, keeps its items' record there; status, collect, diff, report and tasks show "
         "read BATCH/ITEM from it (also a path); resume continues a task (an id, or BATCH/N) "
         "from its record there on any machine.")]
OutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", metavar="PATH",
    help="Where to write: a report's HTML file (never through a symlink; default "
         "reports/report-ID.html under the data home; - for stdout), or the directory batch "
         "collect fills with diffs and results (.jsonl, .csv).")]
