"""A batch's parent: an ordinary task that submits its items, watches them and collects them.

The parent holds its own task's lock while it works, so only one process
drives a batch. It goes through the items in order, keeping at most
`concurrency` in flight. For each item it first looks at what is there
already, so that a parent started again after a crash (`resume BATCH`)
repeats nothing: an item whose task is at rest is collected; one whose task
another live process is running is re-attached to (waited for); any other is
submitted (made first, if it has no task yet), and its task's own resume
guarantees keep its side effects to one. An attempt whose process ended with
the task not at rest (killed, its worker lost) is submitted again, up to
`max_attempts`. An item whose workspace is a clone is cloned first, in flight
like a running item: the parent polls the clone, so one that stalls holds its
own place, never the loop.

Before it submits an item the parent reserves the item's budget: what is left
of `--budget` after every collected item's spending and every other item's
reservation (or spending, when more). When what is left cannot cover an item,
nothing more is submitted; the rest stay untouched and the batch ends
`limit_reached`. With `on_item_error = "stop"` a failed item stops new
submissions the same way.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from normalize.batch.index import ItemIndex
from normalize.batch.items_make import Cloning, make_item, start_clone
from normalize.batch.manifest import BatchFiles, Manifest, Progress, item_status
from normalize.batch.publish import Publisher
from normalize.cancel import CancelToken
from normalize.errors import ExitStatus, NormalizeError
from normalize.events import (
    BatchEnded,
    BatchResumed,
    BatchStarted,
    Emit,
    Emitter,
    ItemUpdated,
    RunEnded,
    RunStarted,
    Subscriber,
)
from normalize.execution.executor import ChildJob, Executor, Handle, Placing
from normalize.faults import crash_point
from normalize.redact import Redactor
from normalize.runner import RunOptions
from normalize.store import TaskStore, fenced
from normalize.store.journal import JournalWriter
from normalize.store.objects import open_objects, records
from normalize.store.ownership import TaskLock, expire_lease, lease_held, pid_alive
from normalize.store.record import ENV as RECORD_ENV
from normalize.task import Task, TaskStatus

POLL = 0.1  # seconds between looks at the items in flight
CHILDREN_EVERY = 2.0  # seconds at least between two saves of the parent's list of children
AT_REST = frozenset({TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.LIMIT, TaskStatus.STUCK,
                     TaskStatus.WAITING})
FAILED = frozenset({TaskStatus.FAILED, TaskStatus.STUCK, TaskStatus.LIMIT})
EPSILON = 1e-9


@dataclass
class BatchOutcome:
    """How a batch's run ended."""

    batch: str
    status: TaskStatus
    counts: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    untouched: list[int] = field(default_factory=list)  # positions never submitted
    why: str = ""  # why items were left untouched: UNTOUCHED_WHY's words

    @property
    def exit_status(self) -> int:
        return {TaskStatus.DONE: ExitStatus.DONE, TaskStatus.LIMIT: ExitStatus.LIMIT,
                TaskStatus.INTERRUPTED: ExitStatus.INTERRUPTED}.get(self.status,
                                                                    ExitStatus.FAILED)


@dataclass
class _Flight:
    """An item in flight: a job this parent submitted, or a process it re-attached to."""

    progress: Progress
    handle: Handle | None = None
    owner: tuple[int, int] | None = None  # (pid, epoch) of the process re-attached to
    cloning: Cloning | None = None  # its workspace being cloned, before its task is made


class BatchParent:
    """Drives one batch to its end (see the module doc)."""

    def __init__(self, manifest: Manifest, store: TaskStore, executor: Executor,
                 options: RunOptions, *, watch: Subscriber | None = None) -> None:
        self.manifest = manifest
        self.store = store
        self.files = BatchFiles(store.home, manifest.batch, fsync=store.fsync)
        self.executor = executor
        self.options = options
        self.cancel: CancelToken = options.cancel
        self.watch = watch  # the batch's events, as the emitter stamped and redacted them
        self._emit: Emit | None = None  # the parent's one emit, while it runs
        self.node = socket.gethostname()
        self._flights: dict[int, _Flight] = {}
        self.index = ItemIndex(store, manifest.batch)
        entries = self.index.read()  # the items at rest already: their files left unread
        self._progress = self.files.all_progress(
            len(manifest.items), {n: e.progress() for n, e in entries.items()})
        self._rested = {n: (e.status, e.cost_usd) for n, e in entries.items()}
        self.parent: Task = Task(id="", goal="", workspace="", driver="batch")  # (run sets)
        self.lock: TaskLock | None = None
        self.publisher = None if not manifest.store else Publisher(
            manifest.store, store, manifest.batch, manifest.origin,
            tuple(manifest.variables.values()))
        self._stopped: int | None = None  # on_item_error = stop: the item that failed
        self._short = False  # the budget could not cover the next item
        self._spent = {e.task_id: e.cost_usd for e in entries.values()}  # a collected item's
        # cost (it no longer changes)
        self._listed = 0.0  # when the parent's task was last saved with its children

    # -- the loop ------------------------------------------------------------

    def run(self) -> BatchOutcome:
        parent = self.parent = self.store.load(self.manifest.batch)
        lock = self.lock = self.store.lock(parent.id)
        if self.manifest.store and records(self.manifest.store):  # its record there too
            self.store.record_url = self.manifest.store
        lock.acquire(parent.epoch, record=True)
        journal = self.store.journal(parent.id, redact=False)  # the emitter redacts
        try:
            emitter = self._emitter(parent, journal)
            started = emitter.emit(RunStarted(
                goal=parent.goal, driver="batch", workspace=parent.workspace,
                workflow=parent.workflow, resumed=emitter.seq > 0, epoch=lock.epoch,
                pid=os.getpid(), max_cost_usd=self.manifest.limits.budget), durable=True)
            self._emit = emitter.emit
            emitter.emit(BatchResumed(batch=parent.id, items=len(self.manifest.items))
                         if started.seq > 1 else
                         BatchStarted(batch=parent.id, items=len(self.manifest.items),
                                      executor=self.manifest.executor))
            parent.status, parent.epoch = TaskStatus.RUNNING, lock.epoch
            self._list_children()
            self.store.save(parent, lock=lock)
            self._listed = time.monotonic()
            if self.publisher is not None:
                self.publisher.manifest()
            outcome = self._loop()
            parent.status, parent.usage.cost_usd = outcome.status, outcome.cost_usd
            parent.summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.counts.items()))
            emitter.emit(BatchEnded(batch=parent.id, status=outcome.status.value,
                                    counts=outcome.counts, cost_usd=outcome.cost_usd,
                                    untouched=outcome.untouched, why=outcome.why))
            ended = emitter.emit(RunEnded(
                status=outcome.status.value, exit_code=int(outcome.exit_status),
                summary=parent.summary, cost_usd=outcome.cost_usd), durable=True)
            parent.seq = emitter.seq
            parent.elapsed += ended.ts - started.ts
            self.store.save(parent, lock=lock)
            if self.publisher is not None:
                self.publisher.task(parent.id)
            return outcome
        finally:
            journal.close()
            lock.release()

    def _emitter(self, parent: Task, journal: JournalWriter) -> Emitter:
        """The parent's one emit: its run's start and end, in its journal and to its tracing
        (the batch's span, which each item's run joins through `TRACEPARENT`)."""
        redact = self.store.redact or Redactor.for_workspace(self.manifest.origin)
        emitter = Emitter(parent.id, seq=self.store.last_seq(parent), journal=journal,
                          redact=redact)
        if self.watch is not None:
            emitter.subscribe(self.watch)
        if self.options.tracing is not None:
            emitter.subscribe(self.options.tracing)
        return emitter

    def _loop(self) -> BatchOutcome:
        self._index_rest()
        waiting = [p for p in self._progress if p.stage != "collected"]
        while (waiting or self._flights) and not self.cancel.cancelled:
            while waiting and len(self._flights) < self.manifest.limits.concurrency \
                    and self._stopped is None and not self._short:
                if not self._start(waiting[0]):
                    break
                waiting.pop(0)
            if (self._stopped is not None or self._short) and not self._flights:
                break
            self._settle(waiting)
            if self._flights:
                self.cancel.wait(POLL)
        if self.cancel.cancelled:
            self._stop_all()
        return self._outcome()

    def _index_rest(self) -> None:
        """Index the items collected but not (or no longer) covered by the index: a parent
        killed between the two writes, or an item resumed by hand since."""
        for progress in self._progress:
            if progress.stage == "collected" and progress.position not in self._rested:
                task = self._load(progress.task_id)
                status = item_status(self.store, progress)
                cost = task.usage.cost_usd if task is not None else 0.0
                self.index.add(progress, status, task)
                self._rested[progress.position] = (status, cost)

    def _save(self, progress: Progress) -> None:
        self.files.save(progress)
        if self.publisher is not None:
            self.publisher.progress(progress)

    # -- starting an item -------------------------------------------------------

    def _start(self, progress: Progress) -> bool:
        """Collect, re-attach to or submit one item; False when its budget cannot be reserved."""
        task = self._load(progress.task_id)
        if task is not None and task.status in AT_REST:
            self._collect(progress, task)
            return True
        owner = self.store.owner(progress.task_id)
        if task is not None and task.status is TaskStatus.RUNNING and owner is not None \
                and owner[0] != os.getpid() and self._running(progress.task_id, owner):
            self._flights[progress.position] = _Flight(progress, owner=owner)
            return True
        if progress.stage == "untouched" and not self._reserve(progress):
            self._short = True
            return False
        self._submit(progress, task)
        return True

    def _reserve(self, progress: Progress) -> bool:
        """Set the item's budget aside, if `--budget` still covers it."""
        limits = self.manifest.limits
        share = limits.item_budget
        if share is None and limits.budget is not None:
            share = limits.budget / len(self.manifest.items)
        if share is None:
            return True
        if limits.budget is not None and self._committed() + share > limits.budget + EPSILON:
            return False
        progress.reserved = share
        self._save(progress)
        return True

    def _committed(self) -> float:
        """What the batch has spent, or set aside for items still running."""
        total = 0.0
        for progress in self._progress:
            if progress.stage == "untouched":
                total += progress.reserved
                continue
            settled = progress.stage == "collected"
            spent = self._spent.get(progress.task_id) if settled else None
            if spent is None:
                task = self._load(progress.task_id)
                spent = task.usage.cost_usd if task is not None else 0.0
                if settled:
                    self._spent[progress.task_id] = spent
            total += spent if settled else max(progress.reserved, spent)
        return total

    def _made(self, task_id: str) -> None:
        """A child made: listed in the parent's task, saved at most every `CHILDREN_EVERY`
        seconds (a save per item rewrote the whole list each time); `run` saves it at the end,
        and a resumed run lists what a killed one made since (`_list_children`)."""
        self.parent.children.append(task_id)
        if time.monotonic() - self._listed >= CHILDREN_EVERY:
            self.store.save(self.parent, lock=self.lock)
            self._listed = time.monotonic()

    def _list_children(self) -> None:
        """The parent's children: those it listed, and any item made but not listed yet."""
        listed = set(self.parent.children)
        for progress in self._progress:
            if progress.stage != "untouched" and progress.task_id not in listed \
                    and self.store.task_path(progress.task_id).is_file():
                self.parent.children.append(progress.task_id)

    def _submit(self, progress: Progress, task: Task | None,
                workspace: Path | None = None) -> None:
        if task is None:
            try:
                cloning = None if workspace is not None else start_clone(
                    self.manifest, self.manifest.items[progress.position], progress.task_id,
                    self.store)
                if cloning is not None:  # polled by `_settle`; made when it is there
                    self._flights[progress.position] = _Flight(progress, cloning=cloning)
                    return
                make_item(self.manifest, progress.position, progress.task_id,
                          replace(self.options, store=self.store), self.store,
                          progress.reserved or None, workspace)
            except NormalizeError as exc:
                progress.note = str(exc)
                self._finish(progress, "failed", 0.0)
                return
            self._made(progress.task_id)
        progress.stage, progress.attempts = "submitted", progress.attempts + 1
        progress.node = self.node
        self._save(progress)
        log = self.store.tasks_dir / progress.task_id / "executor.log"
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tracing, flags = self.options.tracing, self.manifest.flags
        if tracing is not None:  # traced as the batch is (`--otel` alone names no endpoint)
            flags = (*flags, "--otel")
        env = tracing.child_env(progress.task_id) if tracing is not None else {}
        if self.manifest.store and records(self.manifest.store):
            env[RECORD_ENV] = self.manifest.store  # the item keeps its record there too
        handle = self.executor.submit(ChildJob(
            progress.task_id, str(self.store.home), flags, str(log), env=env))
        self._flights[progress.position] = _Flight(progress, handle=handle)
        self._item(progress, "running")

    # -- watching and collecting ---------------------------------------------------

    def _settle(self, waiting: list[Progress]) -> None:
        """Collect each item in flight whose attempt has ended; submit again one cut short."""
        for position, flight in list(self._flights.items()):
            if flight.cloning is not None:
                self._cloned(flight)
                continue
            if not self._ended(flight):
                continue
            del self._flights[position]
            progress = flight.progress
            if isinstance(self.executor, Placing):
                progress.node = self.executor.nodes.get(progress.task_id, progress.node)
                lost = self.executor.lost.pop(progress.task_id, "")
                progress.attempts += self.executor.retried.pop(progress.task_id, 0)
                progress.note = f"attempt {progress.attempts} lost: {lost}" if lost else ""
            task = self._load(progress.task_id)
            if task is not None and task.status in AT_REST:
                self._collect(progress, task)
            elif self.cancel.cancelled:
                continue
            elif progress.attempts < self.manifest.limits.max_attempts:
                self._expire(progress.task_id, flight)
                waiting.insert(0, progress)  # its worker died: its next attempt resumes it
            else:
                progress.note = f"gave up after {progress.attempts} attempt(s)"
                self._finish(progress, task.status.value if task else "failed",
                             task.usage.cost_usd if task else 0.0)

    def _cloned(self, flight: _Flight) -> None:
        """Submit the item whose clone is made; fail the one whose clone failed."""
        assert flight.cloning is not None
        progress = flight.progress
        try:
            workspace = flight.cloning.poll()
        except NormalizeError as exc:
            del self._flights[progress.position]
            progress.note = str(exc)
            self._finish(progress, "failed", 0.0)
            return
        if workspace is not None:
            del self._flights[progress.position]
            self._submit(progress, None, workspace)

    def _expire(self, task_id: str, flight: _Flight) -> None:
        """The executor says the attempt ended: its lease ends too (its holder is gone)."""
        owner = self.store.owner(task_id)
        if flight.handle is not None and owner is not None:
            expire_lease(self.store.tasks_dir, task_id, owner[1])
            if self.manifest.store and records(self.manifest.store):  # and in the store
                with contextlib.suppress(NormalizeError):
                    fenced.expire_lease(open_objects(self.manifest.store), task_id, owner[1])

    def _ended(self, flight: _Flight) -> bool:
        if flight.handle is not None:
            return self.executor.collect(flight.handle, 0) is not None
        return flight.owner is None or not self._running(flight.progress.task_id, flight.owner)

    def _running(self, task_id: str, owner: tuple[int, int]) -> bool:
        """Whether another process still runs the task: its lease renewed (on any machine),
        or, for a task without one, its process alive here."""
        held = lease_held(self.store.tasks_dir, task_id, owner[1])
        return _alive(owner[0]) if held is None else held

    def _collect(self, progress: Progress, task: Task) -> None:
        if self.publisher is not None:
            self.publisher.item(task.id)
        self._finish(progress, task.status.value, task.usage.cost_usd, task)

    def _finish(self, progress: Progress, status: str, cost: float,
                task: Task | None = None) -> None:
        progress.stage = "collected"
        self._save(progress)
        crash_point("batch_collected")
        self.index.add(progress, status, task)  # (a crash before it: read from the files)
        self._rested[progress.position] = (status, cost)
        if self.manifest.limits.on_item_error == "stop" and status in FAILED | {"failed"} \
                and self._stopped is None:
            self._stopped = progress.position
        self._item(progress, status, cost, progress.note)

    def _item(self, progress: Progress, status: str, cost: float = 0.0, note: str = "") -> None:
        assert self._emit is not None, "items are updated while the batch runs"
        self._emit(ItemUpdated(position=progress.position, item_task_id=progress.task_id,
                               status=status, attempts=progress.attempts, cost_usd=cost,
                               note=note, item=self.manifest.items[progress.position]))

    def _stop_all(self) -> None:
        """Stop every job this parent submitted; their leases end with them, so a resumed
        batch (`resume BATCH`, perhaps as a new Ray job) submits them again at once."""
        for flight in self._flights.values():
            if flight.cloning is not None:
                with contextlib.suppress(NormalizeError):
                    flight.cloning.stop()
            if flight.handle is not None:
                with contextlib.suppress(KeyError):
                    self.executor.cancel(flight.handle)
                self._expire(flight.progress.task_id, flight)

    # -- the end ------------------------------------------------------------------

    def _outcome(self) -> BatchOutcome:
        counts: dict[str, int] = {}
        cost, untouched = 0.0, []
        for progress in self._progress:
            status, spent = self._rest(progress)
            counts[status] = counts.get(status, 0) + 1
            if status == "untouched":
                untouched.append(progress.position)
            cost += spent
        status = TaskStatus.DONE
        if self.cancel.cancelled:
            status = TaskStatus.INTERRUPTED
        elif untouched and self._short:
            status = TaskStatus.LIMIT
        elif untouched or any(counts.get(s, 0) for s in (*FAILED, "failed", "interrupted")):
            status = TaskStatus.FAILED
        return BatchOutcome(self.manifest.batch, status, counts, cost, untouched,
                            self._why() if untouched else "")

    def _rest(self, progress: Progress) -> tuple[str, float]:
        """An item's status and cost at the end: as collected (no file read), else its task's
        (and none for an untouched one: a stopped batch of 100,000 ends fast)."""
        rested = self._rested.get(progress.position)
        if rested is not None:
            return rested
        status = item_status(self.store, progress)
        if status == "untouched":
            return status, 0.0
        task = self._load(progress.task_id)
        return status, task.usage.cost_usd if task is not None else 0.0

    def _why(self) -> str:
        """Why items were left untouched, in words."""
        if self.cancel.cancelled:
            return "the batch was interrupted"
        if self._stopped is not None:
            return f'on_item_error = "stop": item {self._stopped} failed'
        if self._short:
            return "the budget could not cover them"
        return "not reached"

    def _load(self, task_id: str) -> Task | None:
        try:
            return self.store.load(task_id, with_config=False)
        except NormalizeError:
            return None


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie no one reaped does not)."""
    if not pid_alive(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rsplit(b")", 1)[-1].split()[0] != b"Z"
