"""What `normalize batch` does: start a batch (or `agent --items`), drive it, resume it, and
read a published one back.

`cli/batch.py` holds the `batch` commands' typer signatures; their bodies and
`launch` come here, so this module loads only when a batch is at hand and
imports at the top like any module.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from normalize.batch.begin import BatchRequest, make_executor, open_batch, start_batch
from normalize.batch.items import read_items as parse
from normalize.batch.manifest import BatchFiles, BatchLimits
from normalize.batch.parent import BatchParent
from normalize.batch.publish import published_diff, pull_batch
from normalize.batch.watch import collect, rows
from normalize.cli.changes import write_report
from normalize.cli.commands import pin_replay, show_task
from normalize.cli.console import Environment, SignalCancel, fail, write_on
from normalize.cli.describe import batch_line, batch_start_line
from normalize.cli.launch import tracing
from normalize.cli.outcome import stopping_note
from normalize.errors import NormalizeError, TaskNotFoundError, UsageError
from normalize.events import BatchEnded, BatchResumed, BatchStarted, Event, ItemUpdated
from normalize.homes import batch_item_id, data_home
from normalize.redact import inert
from normalize.runner import RunOptions, parse_vars
from normalize.store import TaskStore
from normalize.store.fenced import read_checkpoint
from normalize.store.objects import open_objects, probe, records
from normalize.store.record import ENV, rebuild
from normalize.store.remote import ID, RemoteStore, is_remote

if TYPE_CHECKING:
    from normalize.batch.manifest import Manifest
    from normalize.batch.watch import ItemRow
    from normalize.cli.requests import Agent, Batch, Launch
    from normalize.execution.executor import Executor

_T = TypeVar("_T")


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


def batch_start(env: Environment, request: Batch) -> int:
    """`normalize batch WORKFLOW --items FILE`: the batch's request, started and driven."""
    network = request.network_setting()
    started = BatchRequest(
        request.workflow, read_items(env, request.items, request.items_format),
        goal=request.goal, variables=parse_vars(list(request.variables)), model=request.model,
        workspace=request.item_workspace, executor=request.executor,
        address=request.address or "", on_item_error=request.on_item_error,
        limits=BatchLimits(concurrency=request.concurrency, budget=request.budget,
                           item_budget=request.item_budget, max_attempts=request.max_attempts,
                           cpus=request.item_cpus, memory_mb=request.item_memory),
        flags=item_flags(request.approve, request.sandbox, network),
        store=_publish_url(request.store), output_schema=str(request.output_schema or ""))
    return start(env, started, request, network)


def agent_items(env: Environment, request: Agent) -> int:
    """`normalize agent --items FILE TASK`: the agent once per item, TASK with {item.NAME}."""
    network = request.network_setting()
    started = BatchRequest(
        request.workflow or "dwim", read_items(env, required("--items", request.items), None),
        goal=request.task, model=pin_replay(request.model),
        limits=BatchLimits(concurrency=request.concurrency, budget=request.budget,
                           item_budget=request.item_budget),
        flags=item_flags(request.approve, request.sandbox, network),
        output_schema=str(request.output_schema or ""))
    return start(env, started, request, network)


def required(flag: str, value: _T | None) -> _T:
    """A value typer already required (a shared option's type allows None where others leave
    it out)."""
    if value is None:
        raise UsageError(f"{flag} is required")
    return value


def _publish_url(url: str | None) -> str:
    """`--store URL` of a new batch: a remote URL (it is checked as the batch starts)."""
    if url is None:
        return ""
    if not is_remote(url):
        raise UsageError(f"--store {url}: a batch runs in this data home; --store names a "
                         "URL to publish it to (s3://…, gs://…)")
    RemoteStore(url)  # its protocol's package is there
    if records(url):  # where items keep their record: its conditional writes are checked first
        probe(open_objects(url))
    return url


def read_items(env: Environment, source: str, fmt: str | None) -> list[dict[str, Any]]:
    text = env.stdin.read() if source == "-" else None
    return parse(source, text, fmt)


def start(env: Environment, request: BatchRequest, flags: Launch,
          network: bool | tuple[str, ...] | None) -> int:
    """Start the batch, print its id first, and drive it to its end."""
    try:
        root = (flags.workspace or Path.cwd()).resolve()
        if not root.is_dir():
            raise UsageError(f"--workspace {root}: not a directory")
        store = TaskStore()
        options = RunOptions(workspace=root, approve=flags.approve, sandbox=flags.sandbox,
                             network=network, store=store, tracing=tracing(env, flags.otel))
        manifest = start_batch(request, options, store)
    except NormalizeError as exc:
        return fail(env, exc)
    return drive(env, manifest, store, options, json_output=flags.json_output,
                 quiet=flags.quiet)


def drive(env: Environment, manifest: Manifest, store: TaskStore,
          options: RunOptions, *, json_output: bool,
          quiet: bool) -> int:
    """Run the batch's parent to its end, one line per batch event (with `--json`, the event as
    the parent's emitter stamped and redacted it); the batch's exit status."""
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
        self.total = total
        self.clock = time.monotonic
        self.started = self.clock()
        self.status: dict[int, str] = {}
        self.cost: dict[int, float] = {}

    def note(self, update: ItemUpdated) -> None:
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


def _connected(env: Environment, manifest: Manifest, json_output: bool
               ) -> Executor | int:
    """The batch's executor, connected; or, refused before the batch's run began (the batch
    as it was, resumable), its id said as its first line would have and the exit status."""
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


def _line(env: Environment, json_output: bool,
          event: BatchStarted | BatchResumed | ItemUpdated | BatchEnded) -> None:
    """One line of the batch on stdout; a reader that left early stops the output, not the batch."""
    write_on(env.stdout, (event.to_json() if json_output else batch_line(event)) + "\n")


def resume_batch(env: Environment, ref: str, *, json_output: bool, quiet: bool,
                 otel: bool = False) -> int:
    """`normalize resume BATCH`: collect what ended, re-attach, submit only the rest."""
    try:
        store = TaskStore()
        manifest = open_batch(store, ref)
        options = RunOptions(workspace=Path(manifest.origin), store=store,
                             tracing=tracing(env, otel))
    except NormalizeError as exc:
        return fail(env, exc)
    return drive(env, manifest, store, options, json_output=json_output, quiet=quiet)


def store_at(url: str | None, batch: str = "") -> TaskStore:
    """The data home to read a batch from: this one, a path, or a pull of a URL's."""
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


def table(env: Environment, manifest: Manifest, found: list[ItemRow]) -> int:
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


def pulled(url: str, ref: str) -> Path:
    """A scratch data home holding the batch `ref` (or the batch of `BATCH/ITEM`) from `url`."""

    home = Path(tempfile.mkdtemp(prefix="normalize-pulled-"))
    atexit.register(shutil.rmtree, home, True)
    pull_batch(url, ref.partition("/")[0], home)
    return home


def show_remote(env: Environment, ref: str, url: str, *, json_output: bool) -> int:
    """`tasks show BATCH/ITEM --store URL`: the item as its batch's parent published it."""
    try:
        home = store_at(url, ref).home
    except NormalizeError as exc:
        return fail(env, exc)
    os.environ["NORMALIZE_HOME"] = str(home)  # (this process reads that store from here on)
    return int(show_task(env, ref, json_output=json_output))


def report_remote(env: Environment, ref: str, url: str, output: Path | None) -> int:
    """`report BATCH/ITEM --store URL`: the item's report from what its batch's parent
    published, written under this data home (or to `-o`)."""
    mine = data_home()
    try:
        where = store_at(url, ref)
        patch = published_diff(where.home, where.resolve(ref.partition("/")[0]),
                               where.resolve(ref))
    except NormalizeError as exc:
        return fail(env, exc)
    os.environ["NORMALIZE_HOME"] = str(where.home)  # (this process reads that store from here)
    return write_report(env, ref, output, home=mine, published=patch or "")


def diff_remote(env: Environment, ref: str, url: str) -> int:
    """`diff BATCH/ITEM --store URL`: the item's net change as its batch's parent published it."""
    try:
        where = store_at(url, ref)
        task_id = where.resolve(ref)
        batch = where.resolve(ref.partition("/")[0])
    except NormalizeError as exc:
        return fail(env, exc)
    patch = published_diff(where.home, batch, task_id)
    if not patch:
        env.stderr.write(f"task {task_id}: no changes published\n")
        return 0
    env.stdout.write(inert(patch))
    return 0


def status(env: Environment, batch: str, store: str | None, *, json_output: bool) -> int:
    """`batch status BATCH`: where each item stands, as a table or JSON lines."""
    try:
        where = store_at(store, batch)
        manifest = BatchFiles(where.home, where.resolve(batch)).manifest()
        found = rows(where, manifest)
    except NormalizeError as exc:
        return fail(env, exc)
    if json_output:
        for row in found:
            env.stdout.write(json.dumps(row.__dict__) + "\n")
        return 0
    return table(env, manifest, found)


def collect_into(env: Environment, batch: str, output: Path | None, store: str | None) -> int:
    """`batch collect BATCH -o DIR`: every item's diff and result gathered in DIR."""
    try:
        where = store_at(store, batch)
        manifest = BatchFiles(where.home, where.resolve(batch)).manifest()
        count = collect(where, manifest, required("--output", output))
    except NormalizeError as exc:
        return fail(env, exc)
    except OSError as exc:
        return fail(env, UsageError(f"--output {output}: {exc.strerror}"))
    env.stdout.write(f"batch {manifest.batch}: {count} items collected in {output}\n")
    return 0


def from_record(url: str, ref: str) -> str:
    """`resume TASK --store URL`: the task's id, its record brought into this data home when
    this home has none of it or an older state (it ran elsewhere since); from here on this
    process keeps its runs' record at `url`."""
    if not records(url):
        raise UsageError(f"--store {url}: resume needs a store of record: "
                         "s3://BUCKET/PREFIX or file://PATH")
    head, _, tail = ref.partition("/")
    task_id = batch_item_id(head, int(tail)) if tail.isdigit() else ref
    if ID.fullmatch(task_id) is None:
        raise UsageError(f"resume --store: {ref!r} is not a task id or BATCH/N (a prefix or "
                         "`last` cannot be looked up in a store)")
    objects = open_objects(url)
    probe(objects)
    state = read_checkpoint(objects, task_id)
    if state is None:
        raise TaskNotFoundError(f"no record of task {task_id} in {url}")
    if json.loads(state).get("driver") == "batch":
        raise UsageError(f"task {task_id} is a batch: `resume BATCH --store URL` from another "
                         "data home is not supported yet (resume it where it started)")
    local = TaskStore()
    try:
        seq = int(local.state(task_id).get("seq") or 0)
    except (NormalizeError, ValueError):
        seq = -1
    if seq < int(json.loads(state).get("seq") or 0):
        rebuild(objects, task_id, local.home)
    os.environ[ENV] = url
    return task_id
