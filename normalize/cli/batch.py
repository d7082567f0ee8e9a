"""`normalize batch`: one workflow (or the agent) over many items, as sub-tasks of one parent.

`normalize batch WORKFLOW --items FILE` runs it (the `run` word may be left
out); `batch status BATCH` and `batch collect BATCH -o DIR` watch and gather
it. `resume BATCH` continues a batch whose parent stopped (see
`normalize.batch.parent`).
"""

# No `from __future__ import annotations`: typer reads the annotations at start-up.

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

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
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.batch.begin import BatchRequest
    from normalize.batch.manifest import Manifest
    from normalize.batch.watch import ItemRow
    from normalize.cli.console import Environment
    from normalize.events import BatchEnded, BatchResumed, BatchStarted, ItemUpdated
    from normalize.execution.executor import Executor
    from normalize.runner import RunOptions
    from normalize.store import TaskStore

_T = TypeVar("_T")


class _DefaultRun(TyperGroup):
    """A group whose first word may be left out: `batch WF …` means `batch run WF …`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


batch_app = typer.Typer(cls=_DefaultRun, rich_markup_mode=None,
                        help="A workflow over many items, each a sub-task.")


def item_flags(approve: str | None, sandbox: str | None,
               network: bool | tuple[str, ...] | None) -> tuple[str, ...]:
    """The flags every item's run gets (as a sub-task's)."""
    flags: list[str] = []
    if sandbox is not None:
        flags += ["--sandbox", sandbox]
    if network is False:
        flags.append("--no-network")
    elif network is not None:
        for host in ("*",) if network is True else network:
            flags += ["--network", host]
    if approve:
        flags += ["--approve", approve]
    return tuple(flags)


def _env() -> "Environment":
    from normalize.cli.console import Environment

    return Environment()


def fail(env: "Environment", exc: NormalizeError) -> int:
    from normalize.cli.console import fail as failed

    return int(failed(env, exc))


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
    from normalize.batch.begin import BatchRequest
    from normalize.batch.manifest import BatchLimits
    from normalize.runner import parse_vars

    env = _env()
    try:
        request = BatchRequest(
            workflow, read_items(env, required("--items", items), items_format), goal=goal,
            variables=parse_vars(var or []), model=model, workspace=item_workspace,
            executor=executor, address=address or "", on_item_error=on_item_error,
            limits=BatchLimits(concurrency=concurrency, budget=_usd("--budget", budget),
                               item_budget=_usd("--item-budget", item_budget),
                               max_attempts=max_attempts, cpus=item_cpus,
                               memory_mb=item_memory),
            flags=item_flags(approve, sandbox, False if no_network else None),
            store=_publish_url(store), output_schema=str(output_schema or ""))
    except NormalizeError as exc:
        raise typer.Exit(fail(env, exc)) from None
    raise typer.Exit(start(env, request, workspace=workspace, approve=approve, sandbox=sandbox,
                           network=False if no_network else None, otel=otel,
                           json_output=json_output, quiet=quiet))


def agent_items(env: "Environment", goal: str, items: str, *, workflow: str | None,
                model: str | None,
                budget: float | None, item_budget: float | None, concurrency: int,
                approve: str | None, sandbox: str | None, network: bool | tuple[str, ...] | None,
                workspace: Path | None, json_output: bool, quiet: bool,
                output_schema: Path | None = None, otel: bool = False) -> int:
    """`normalize agent --items FILE GOAL`: the agent once per item, GOAL with {item.NAME}."""
    from normalize.batch.begin import BatchRequest
    from normalize.batch.manifest import BatchLimits
    from normalize.cli.commands import pin_replay

    try:
        if not goal.strip():
            raise UsageError("TASK is empty: say what the agent should do with each item")
        request = BatchRequest(
            workflow or "dwim", read_items(env, items, None), goal=goal, model=pin_replay(model),
            limits=BatchLimits(concurrency=concurrency, budget=_usd("--budget", budget),
                               item_budget=_usd("--item-budget", item_budget)),
            flags=item_flags(approve, sandbox, network), output_schema=str(output_schema or ""))
    except NormalizeError as exc:
        return fail(env, exc)
    return start(env, request, workspace=workspace, approve=approve, sandbox=sandbox,
                 network=network, otel=otel, json_output=json_output, quiet=quiet)


def required(flag: str, value: _T | None) -> _T:
    """A value typer already required (a shared option's type allows None where others leave
    it out)."""
    if value is None:
        raise UsageError(f"{flag} is required")
    return value


def _publish_url(url: str | None) -> str:
    """`--store URL` of a new batch: a remote URL (it is checked as the batch starts)."""
    from normalize.store.remote import RemoteStore, is_remote

    if url is None:
        return ""
    if not is_remote(url):
        raise UsageError(f"--store {url}: a batch runs in this data home; --store names a "
                         "URL to publish it to (s3://…, gs://…)")
    RemoteStore(url)  # its protocol's package is there
    return url


def _usd(flag: str, value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise UsageError(f"{flag} {value:g}: must be more than 0 (USD)")
    return value


def read_items(env: "Environment", source: str, fmt: str | None) -> list[dict[str, Any]]:
    from normalize.batch.items import read_items as parse

    text = env.stdin.read() if source == "-" else None
    return parse(source, text, fmt)


def start(env: "Environment", request: "BatchRequest", *, workspace: Path | None,
          approve: str | None,
          sandbox: str | None, network: bool | tuple[str, ...] | None, otel: bool,
          json_output: bool, quiet: bool) -> int:
    """Start the batch, print its id first, and drive it to its end."""
    from normalize.batch.begin import start_batch
    from normalize.cli.launch import tracing
    from normalize.runner import RunOptions
    from normalize.store import TaskStore

    try:
        root = (workspace or Path.cwd()).resolve()
        if not root.is_dir():
            raise UsageError(f"--workspace {root}: not a directory")
        store = TaskStore()
        options = RunOptions(workspace=root, approve=approve, sandbox=sandbox, network=network,
                             store=store, tracing=tracing(env, otel))
        manifest = start_batch(request, options, store)
    except NormalizeError as exc:
        return fail(env, exc)
    return drive(env, manifest, store, options, json_output=json_output, quiet=quiet)


def drive(env: "Environment", manifest: "Manifest", store: "TaskStore",
          options: "RunOptions", *, json_output: bool,
          quiet: bool) -> int:
    """Run the batch's parent to its end, one line per batch event (with `--json`, the event as
    the parent's emitter stamped and redacted it); the batch's exit status."""
    from normalize.batch.parent import BatchParent
    from normalize.cli.console import SignalCancel, write_on
    from normalize.cli.outcome import stopping_note
    from normalize.events import BatchEnded, BatchResumed, BatchStarted, Event, ItemUpdated

    tally = Tally(len(manifest.items))
    live = env.stderr_tty and not env.plain and not json_output and not quiet

    def report(event: Event) -> None:
        if isinstance(event, ItemUpdated):
            tally.note(event)
            shown = not quiet and (json_output or event.status != "running")
        else:
            shown = isinstance(event, BatchStarted | BatchResumed | BatchEnded)
        if live:
            env.stderr.write("\r\033[2K")  # the status line goes; the item's line goes above
        if shown:
            assert isinstance(event, BatchStarted | BatchResumed | ItemUpdated | BatchEnded)
            _line(env, json_output, event)
        if live and not isinstance(event, BatchEnded):
            env.stderr.write(tally.line())
            env.stderr.flush()

    executor = _connected(env, manifest, json_output)
    if isinstance(executor, int):
        return executor
    try:
        parent = BatchParent(manifest, store, executor, options, watch=report)
        with SignalCancel(options.cancel, notify=stopping_note(env)):
            outcome = parent.run()
    except NormalizeError as exc:
        return fail(env, exc)
    finally:
        if live:
            env.stderr.write("\r\033[2K")
    if outcome.untouched and not json_output:
        shown = ", ".join(map(str, outcome.untouched[:20]))
        more = " …" if len(outcome.untouched) > 20 else ""
        write_on(env.stdout, f"  left untouched ({outcome.why}): items {shown}{more}\n")
    if not json_output and outcome.status.value != "done":
        write_on(env.stdout, f"  see `normalize batch status {outcome.batch}`; "
                             f"`normalize resume {outcome.batch}` continues it\n")
    return outcome.exit_status


class Tally:
    """The batch so far, for the status line at a terminal: counts, cost, ETA."""

    def __init__(self, total: int) -> None:
        import time

        self.total = total
        self.clock = time.monotonic
        self.started = self.clock()
        self.status: dict[int, str] = {}
        self.cost: dict[int, float] = {}

    def note(self, update: "ItemUpdated") -> None:
        self.status[update.position] = update.status
        self.cost[update.position] = update.cost_usd

    def line(self) -> str:
        """`12/40 done · 4 running · 1 failed · 0 waiting · $0.1200 · ETA 1m20s`."""
        counts = {"done": 0, "running": 0, "failed": 0, "waiting": 0}
        for status in self.status.values():
            key = {"limit_reached": "failed", "stuck": "failed", "interrupted": "failed",
                   "pending": "running"}.get(status, status)
            counts[key] = counts.get(key, 0) + 1
        ended = self.total - sum(1 for s in self.status.values() if s in ("running", "pending"))
        ended -= self.total - len(self.status)
        eta = ""
        if ended:
            left = (self.clock() - self.started) / ended * (self.total - ended)
            eta = f" · ETA {int(left // 60)}m{int(left % 60):02d}s"
        return (f"{counts['done']}/{self.total} done · {counts['running']} running · "
                f"{counts['failed']} failed · {counts['waiting']} waiting · "
                f"${sum(self.cost.values()):.4f}{eta}")


def _connected(env: "Environment", manifest: "Manifest", json_output: bool
               ) -> "Executor | int":
    """The batch's executor, connected; or, refused before the batch's run began (the batch
    as it was, resumable), its id said as its first line would have and the exit status."""
    from normalize.batch.begin import make_executor
    from normalize.cli.console import write_on
    from normalize.cli.describe import batch_start_line

    if manifest.executor == "ray" and not (manifest.address or os.environ.get("RAY_ADDRESS")):
        env.stderr.write("normalize: notice: --executor ray with no --address (nor RAY_ADDRESS): "
                         "starting a local Ray cluster on this machine\n")
    try:
        return make_executor(manifest)
    except NormalizeError as exc:
        if not json_output:
            write_on(env.stdout, batch_start_line(manifest.batch, len(manifest.items),
                                                  manifest.executor) + "\n")
        return fail(env, exc)


def _line(env: "Environment", json_output: bool,
          event: "BatchStarted | BatchResumed | ItemUpdated | BatchEnded") -> None:
    """One line of the batch on stdout; a reader that left early stops the output, not the batch."""
    from normalize.cli.console import write_on
    from normalize.cli.describe import batch_line

    write_on(env.stdout, (event.to_json() if json_output else batch_line(event)) + "\n")


def resume_batch(env: "Environment", ref: str, *, json_output: bool, quiet: bool,
                 otel: bool = False) -> int:
    """`normalize resume BATCH`: collect what ended, re-attach, submit only the rest."""
    from normalize.batch.begin import open_batch
    from normalize.cli.launch import tracing
    from normalize.runner import RunOptions
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        manifest = open_batch(store, ref)
        options = RunOptions(workspace=Path(manifest.origin), store=store,
                             tracing=tracing(env, otel))
    except NormalizeError as exc:
        return fail(env, exc)
    return drive(env, manifest, store, options, json_output=json_output, quiet=quiet)


def batch_of(ref: str) -> tuple[str, bool]:
    """The id `ref` names and whether it is a batch (a cheap look for `resume`); `ref` itself
    when it names nothing (resuming it says why). Resolved once: `last` reads the store."""
    from normalize.homes import is_batch
    from normalize.store import TaskStore

    store = TaskStore()
    try:
        task_id = store.resolve(ref)
    except NormalizeError:
        return ref, False
    return task_id, is_batch(store.home, task_id)


def _store(url: str | None, batch: str = "") -> "TaskStore":
    """The data home to read a batch from: this one, a path, or a pull of a URL's."""
    from normalize.store import TaskStore
    from normalize.store.remote import is_remote

    if url is None:
        return TaskStore()
    if is_remote(url):
        return TaskStore(pulled(url, batch))
    scheme, sep, rest = url.partition("://")
    if sep and scheme != "file":
        raise UsageError(f"--store {url}: only file:// stores are supported here")
    path = Path(rest if sep else url).expanduser()
    if not (path / "batches").is_dir():
        raise UsageError(f"--store {url}: no batches there")
    return TaskStore(path.resolve())


@batch_app.command("status")
def batch_status(
    batch: Annotated[str, typer.Argument(help="A batch id (or a unique prefix).")],
    store: StoreOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Where each item of a batch stands."""
    from normalize.batch.manifest import BatchFiles
    from normalize.batch.watch import rows

    env = _env()
    try:
        where = _store(store, batch)
        manifest = BatchFiles(where.home, where.resolve(batch)).manifest()
        found = rows(where, manifest)
    except NormalizeError as exc:
        raise typer.Exit(fail(env, exc)) from None
    if json_output:
        for row in found:
            env.stdout.write(json.dumps(row.__dict__) + "\n")
        raise typer.Exit(0)
    raise typer.Exit(_table(env, manifest, found))


def _table(env: "Environment", manifest: "Manifest", found: "list[ItemRow]") -> int:
    from normalize.redact import inert

    counts: dict[str, int] = {}
    for row in found:
        counts[row.status] = counts.get(row.status, 0) + 1
    cost = sum(row.cost_usd for row in found)
    shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    env.stdout.write(f"batch {manifest.batch}: {len(found)} items ({shown}), ${cost:.4f}\n")
    env.stdout.write(f"{'item':>5}  {'task':<8}  {'status':<14} {'tries':>5}  {'node':<16} "
                     f"{'turns':>5}  {'cost':>8}  {'+/-':<11}\n")
    for row in found:
        change = f"+{row.added} -{row.removed}" if row.added or row.removed else ""
        line = (f"{row.position:>5}  {row.task_id:<8}  {row.status:<14} {row.attempts:>5}  "
                f"{row.node[:16]:<16} {row.turns:>5}  ${row.cost_usd:>7.4f}  {change:<11}")
        question = row.question or row.note
        if question:
            line += f"  {inert(question.splitlines()[0])[:80]}"
        env.stdout.write(line.rstrip() + "\n")
    return 0


@batch_app.command("collect")
def batch_collect(
    batch: Annotated[str, typer.Argument(help="A batch id (or a unique prefix).")],
    output: OutputOpt,
    store: StoreOpt = None,
) -> None:
    """Gather every item's diff and result in the --output directory."""
    from normalize.batch.manifest import BatchFiles
    from normalize.batch.watch import collect

    env = _env()
    try:
        where = _store(store, batch)
        manifest = BatchFiles(where.home, where.resolve(batch)).manifest()
        count = collect(where, manifest, required("--output", output))
    except NormalizeError as exc:
        raise typer.Exit(fail(env, exc)) from None
    except OSError as exc:
        raise typer.Exit(fail(env, UsageError(f"--output {output}: {exc.strerror}"))) from None
    env.stdout.write(f"batch {manifest.batch}: {count} items collected in {output}\n")
    raise typer.Exit(0)


def pulled(url: str, ref: str) -> Path:
    """A scratch data home holding the batch `ref` (or the batch of `BATCH/ITEM`) from `url`."""
    import atexit
    import shutil
    import tempfile

    from normalize.batch.publish import pull_batch

    home = Path(tempfile.mkdtemp(prefix="normalize-pulled-"))
    atexit.register(shutil.rmtree, home, True)
    pull_batch(url, ref.partition("/")[0], home)
    return home


def show_remote(env: "Environment", ref: str, url: str, *, json_output: bool) -> int:
    """`tasks show BATCH/ITEM --store URL`: the item as its batch's parent published it."""
    from normalize.cli.commands import show_task

    try:
        home = _store(url, ref).home
    except NormalizeError as exc:
        return fail(env, exc)
    os.environ["NORMALIZE_HOME"] = str(home)  # (this process reads that store from here on)
    return int(show_task(env, ref, json_output=json_output))


def report_remote(env: "Environment", ref: str, url: str, output: Path | None) -> int:
    """`report BATCH/ITEM --store URL`: the item's report from what its batch's parent
    published, written under this data home (or to `-o`)."""
    from normalize.batch.publish import published_diff
    from normalize.cli.changes import write_report
    from normalize.homes import data_home

    mine = data_home()
    try:
        where = _store(url, ref)
        patch = published_diff(where.home, where.resolve(ref.partition("/")[0]),
                               where.resolve(ref))
    except NormalizeError as exc:
        return fail(env, exc)
    os.environ["NORMALIZE_HOME"] = str(where.home)  # (this process reads that store from here)
    return write_report(env, ref, output, home=mine, published=patch or "")


def diff_remote(env: "Environment", ref: str, url: str) -> int:
    """`diff BATCH/ITEM --store URL`: the item's net change as its batch's parent published it."""
    from normalize.batch.publish import published_diff

    try:
        where = _store(url, ref)
        task_id = where.resolve(ref)
        batch = where.resolve(ref.partition("/")[0])
    except NormalizeError as exc:
        return fail(env, exc)
    patch = published_diff(where.home, batch, task_id)
    if not patch:
        env.stderr.write(f"task {task_id}: no changes published\n")
        return 0
    from normalize.redact import inert

    env.stdout.write(inert(patch))
    return 0
