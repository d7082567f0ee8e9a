"""The engine: the one loop every driver runs in, and its single exit door.

    lock → run_started → (resume an in-flight decision) → loop:
        cancel? limits? → driver.decide → decision_made
        → [checkpoint before side effects] → actions → driver.on_result
        → checkpoint → done? → finalize

Every way a run ends goes through `finalize`: it records the ending, saves
the task, emits `run_ended`, and then, whatever failed before, releases the
lock and re-arms the cancel signal. Only taking the lock comes before the
protected region, and it writes nothing. A watcher that raises is detached by
the emitter and never ends the run. The engine knows nothing about models,
TOML or terminals.

Crash safety: a decision with side effects is checkpointed (as `task.inflight`)
before its actions run; each side-effecting action is journaled (fsynced) as
started before it runs and as finished after, and so is each process it
starts. A graceful stop (one Ctrl-C, SIGTERM) that cuts a side effect short
leaves it exactly as a kill would, started and never finished
(`_leave_unknown`), so both kinds of stop leave its outcome unknown. An
action the parser rejected (its body never closed) is answered with the
reason and never run. On resume, the engine's `Recovery` (normalize/recovery.py)
settles what the last process left, through the engine's own steps. A run
that ends with its decision still in flight saves the state of the in-flight
checkpoint, so those results are never fed to the driver twice.

Hand-over: each driver's state is kept under its name (`task.driver_states`).
A driver that takes a task over from another starts fresh; if it has an
optional `adopt(history)` method, it gets the task's last finished actions
(command, tool, status, output, error) first.
"""

from __future__ import annotations

import copy
import os
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from normalize.cancel import CancelToken
from normalize.contract.driver import Adopts, Driver, RunContext, bound_by_limits
from normalize.errors import (
    ExitStatus,
    NormalizeError,
    StaleEpochError,
    StoreError,
    TaskLockedError,
)
from normalize.events import (
    ActionFinished,
    ActionProgressed,
    ActionStarted,
    DecisionMade,
    Emitter,
    Event,
    Journal,
    Notice,
    ProcessStarted,
    RunEnded,
    RunStarted,
    Subscriber,
    TaskSaved,
    WaitingForInput,
    decode_events,
)
from normalize.faults import crash_point
from normalize.hooks import HookRunner
from normalize.intents import rejection
from normalize.recovery import (
    OUTCOME_UNKNOWN,
    Recovery,
    Reply,
    StopRun,
    action_finished,
    read_only,
    reply_text,
)
from normalize.sandbox import SandboxMode, SandboxTier
from normalize.sandbox.gitguard import (
    Change,
    GitGuard,
    describe,
    describe_outside,
    outside,
    protected,
)
from normalize.store import TaskLock, TaskStore
from normalize.task import (
    Action,
    ActionResult,
    Decision,
    ResultStatus,
    Task,
    TaskStatus,
    Usage,
)
from normalize.tools import procs
from normalize.tools.base import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from normalize.checkpoints import WorkspaceCheckpoints

__all__ = ["MAX_PARALLEL", "OUTCOME_UNKNOWN", "Engine", "Reply", "RunOutcome", "reply_text"]

MAX_PARALLEL = 8

@dataclass
class RunOutcome:
    """How a run ended (its repr leaves the task out: `outcome.task` has it all)."""

    task: Task = field(repr=False)
    status: TaskStatus
    exit_status: ExitStatus
    summary: str = ""
    error: str | None = None


def limits_bind(task: Task, driver: Driver) -> bool:
    """Whether the task's limits bind `driver`: the one they were set for, else any but a person."""
    if task.limits.driver is not None:
        return task.limits.driver == task.driver
    return bound_by_limits(driver)


class Engine:
    """Runs a task with a driver until it ends, waits, or is stopped."""

    def __init__(
        self,
        store: TaskStore,
        tools: ToolRegistry,
        tool_ctx: ToolContext,
        *,
        cancel: CancelToken | None = None,
        subscribers: Iterable[Subscriber] = (),
        interactive: bool = False,
        workspace_checkpoints: WorkspaceCheckpoints | None = None,
        hooks: HookRunner | None = None,
        notices: Iterable[str] = (),
        consolidate: Callable[[Task], Iterable[Event]] | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.tool_ctx = tool_ctx
        self.cancel = cancel or tool_ctx.cancel
        self.tool_ctx.cancel = self.cancel
        self.subscribers = list(subscribers)
        self.interactive = interactive
        self._started = 0.0
        self._lock: TaskLock | None = None
        self._emitter: Emitter | None = None
        self._inflight_saved: tuple[dict[str, Any], int] | None = None
        self._approved: set[str] = set()
        self._rerun: set[str] = set()  # side effects run again after a stop (`spawn`)
        self.workspace_checkpoints = workspace_checkpoints  # None: the workspace is not recorded
        self._written: dict[str, set[str]] = {}  # action key -> paths its programs wrote
        self._guard: GitGuard | None = None
        self.hooks = hooks  # the person's hooks (None: none)
        self.notices = list(notices)  # warnings said right after `run_started` (what was ignored)
        self._results_kept = False  # whole results kept since the last checkpoint
        self._recovery = Recovery(store, tools, steps=self)
        self.consolidate = consolidate  # after a run that succeeded: what it proposes to remember

    # -- the loop --------------------------------------------------------

    def run(
        self,
        task: Task,
        driver: Driver,
        *,
        resumed: bool = False,
        reply: Reply | None = None,
    ) -> RunOutcome:
        """Drive `task` to its next resting point and return how it ended.

        Taking ownership (the lock and, on resume, the check that no one changed
        the task since it was loaded) writes nothing, so a refusal simply raises.
        Everything after it is inside the protected region: every way out, an
        exception in the setup included, goes through `finalize`.
        """
        self._started = time.monotonic()
        self._inflight_saved = None
        self._approved = set()
        self._rerun = set()
        self._emitter = None
        self._results_kept = resumed  # a stopped run may have left some
        lock = self.store.lock(task.id)
        lock.acquire(epoch=task.epoch + 1, record=True)
        self._lock = lock
        try:
            if resumed:
                self._check_unchanged(task)
        except BaseException:
            lock.release()
            raise
        task.epoch = lock.epoch
        try:
            ctx = self._open(task, resumed)
            self._begin(task, driver, ctx, resumed, reply)
            while True:
                self._check_limits(task, bound=limits_bind(task, driver))
                decision = driver.decide(task, ctx)
                if decision is None:
                    raise StopRun(TaskStatus.DONE, task.summary or "finished")
                self._run_decision(task, driver, ctx, decision)
        except StopRun as stop:
            return self.finalize(task, driver, stop.status, stop.summary, stop.error)
        except StaleEpochError as exc:  # another process owns the task: write nothing
            return self.finalize(task, driver, TaskStatus.FAILED, error=str(exc), owned=False)
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once, still through the exit door
            self.cancel.cancel("stopped at once")
            return self.finalize(task, driver, TaskStatus.INTERRUPTED, "interrupted",
                                 "stopped at once by a second interrupt")
        except StoreError as exc:
            self._detach_journal()
            return self.finalize(task, driver, TaskStatus.FAILED, error=str(exc))
        except NormalizeError as exc:
            return self.finalize(task, driver, TaskStatus.FAILED, error=str(exc))
        except Exception as exc:
            return self.finalize(task, driver, TaskStatus.FAILED,
                                 error=f"internal error: {type(exc).__name__}: {exc}",
                                 trace=traceback.format_exc(limit=8))
        except BaseException as exc:  # SystemExit and kin: end the run properly, then go on
            self.finalize(task, driver, TaskStatus.INTERRUPTED, "interrupted",
                          f"stopped by {type(exc).__name__}")
            raise

    def _open(self, task: Task, resumed: bool) -> RunContext:
        """The run's emitter (watchers first, then the journal) and the drivers' context."""
        assert self._lock is not None
        emitter = Emitter(task.id, seq=task.seq, redact=self.store.redact)
        self._emitter = emitter
        for subscriber in self.subscribers:
            emitter.subscribe(subscriber)
        journal = self.store.journal(task.id, redact=False)  # the emitter redacts
        journal.guard = self._lock.verify
        if resumed:
            emitter.seq = self.store.last_seq(task)
        emitter.journal = journal
        self.tool_ctx.task_id = task.id
        if self.hooks is not None:
            self.hooks.emit, self.hooks.task_id = emitter.emit, task.id
        return RunContext(task=task, workspace=self.tool_ctx.workspace, emit=emitter.emit,
                          cancel=self.cancel, interactive=self.interactive,
                          request_context=None if self.hooks is None or not self.hooks.active(
                              "before_request") else self.hooks.before_request,
                          compact_veto=None if self.hooks is None or not self.hooks.active(
                              "before_compact") else self.hooks.before_compact)

    def _begin(self, task: Task, driver: Driver, ctx: RunContext, resumed: bool,
               reply: Reply | None) -> None:
        """Restore the driver, announce the run, settle what a resume inherits, checkpoint."""
        handed_from = [name for name in task.driver_states if name != task.driver]
        warned = self.store.announced  # a torn record found while loading is shown too
        if resumed and task.driver in task.driver_states:
            driver.restore(copy.deepcopy(task.driver_state))
        if task.inflight is not None:
            self._inflight_saved = (copy.deepcopy(task.driver_state), task.journal_offset)
        task.status = TaskStatus.RUNNING
        task.error = None
        ctx.emit(RunStarted(goal=task.goal, driver=task.driver, workspace=task.workspace,
                            workflow=task.workflow, resumed=resumed, epoch=task.epoch,
                            pid=os.getpid(), turn=task.turn, max_turns=task.limits.max_turns,
                            max_cost_usd=task.limits.max_cost_usd,
                            input_tokens=task.usage.input_tokens,
                            output_tokens=task.usage.output_tokens,
                            cost_usd=task.usage.cost_usd))
        for message in self.notices:
            ctx.emit(Notice(level="warning", message=message))
        self.notices.clear()  # said once, as the run that was given them starts
        if resumed and handed_from and task.driver not in task.driver_states:
            ctx.emit(Notice(message=f"the {task.driver} driver takes over this task "
                                    f"from {', '.join(handed_from)} at turn {task.turn}"))
            if isinstance(driver, Adopts):  # optional: a driver may read what happened before it
                driver.adopt(self._history(task))
        warned = self._warn(warned)
        if resumed:
            self._recovery.recover(task, driver, ctx, reply)
        self._warn(warned)
        self.checkpoint(task, driver)
        self._workspace(task, start=True)

    def _history(self, task: Task, limit: int = 20) -> list[dict[str, Any]]:
        """The task's last finished actions, for a driver taking it over (`adopt`)."""
        events = [e for e in decode_events(self.store.tail(task.id, 400))
                  if isinstance(e, ActionFinished)]
        return [{"command": e.command or e.tool, "tool": e.tool, "status": e.status,
                 "output": e.preview, "error": e.error} for e in events[-limit:]]

    def _warn(self, start: int) -> int:
        """Announce the store's warnings from index `start` (a torn journal line, …)."""
        warnings = self.store.warnings
        for message in warnings[start:]:
            self.emit(Notice(level="warning", message=message))
        self.store.announced = len(warnings)
        return len(warnings)

    def _check_unchanged(self, task: Task) -> None:
        """Refuse to resume a copy another process changed between our load and our lock."""
        try:
            disk = self.store.load(task.id, with_config=False)  # its stamps are enough
        except NormalizeError:
            return  # damaged or gone: the first checkpoint will write it anew
        if (disk.epoch, disk.seq, disk.updated_at) != (task.epoch, task.seq, task.updated_at):
            raise TaskLockedError(
                f"task {task.id} was run by another process while this one started "
                f"(it is now {disk.status.value}); see `normalize tasks show {task.id}`",
            )

    def _check_limits(self, task: Task, *, bound: bool = True) -> None:
        """Stop on a cancel; and on a limit, unless the driver is not bound by them (a person)."""
        if self.cancel.cancelled:
            raise StopRun(TaskStatus.INTERRUPTED, "interrupted", self.cancel.reason or None)
        if not bound:
            return
        limits = task.limits
        if limits.max_turns is not None and task.turn >= limits.max_turns:
            raise StopRun(TaskStatus.LIMIT, f"reached max_turns ({limits.max_turns})")
        used = task.usage
        if limits.max_tokens is not None and \
                used.input_tokens + used.output_tokens >= limits.max_tokens:
            raise StopRun(TaskStatus.LIMIT, f"reached max_tokens ({limits.max_tokens})")
        if limits.max_cost_usd is not None and _spent(task, limits.max_cost_usd):
            raise StopRun(TaskStatus.LIMIT, f"reached the budget (${used.total_cost_usd:.4f} "
                                            f"of ${limits.max_cost_usd:g}{_with_children(used)})")
        if limits.timeout_seconds is not None and self._elapsed(task) >= limits.timeout_seconds:
            raise StopRun(TaskStatus.LIMIT, f"reached timeout_seconds ({limits.timeout_seconds:g})")

    def _elapsed(self, task: Task) -> float:
        return task.elapsed + (time.monotonic() - self._started)

    def _run_decision(self, task: Task, driver: Driver, ctx: RunContext,
                      decision: Decision) -> None:
        turn = task.turn
        for index, action in enumerate(decision.actions):
            action.key = action.key or f"{turn}.{index}"
        side_effects = any(not self._read_only(a) for a in decision.actions)
        ctx.emit(DecisionMade(turn=turn, thinking=decision.thinking,
                              actions=[a.to_dict() for a in decision.actions],
                              parallel=decision.parallel, done=decision.done,
                              summary=decision.summary))
        if side_effects:  # the checkpoint (fsynced) holds the decision: no journal fsync here
            task.inflight = {"turn": turn, "decision": decision.to_dict()}
            self.checkpoint(task, driver)
        self.execute(task, driver, ctx, decision.actions, decision.parallel,
                      fanout=decision.max_concurrency)
        self.settle(task, driver, decision)

    def settle(self, task: Task, driver: Driver, decision: Decision) -> None:
        """Close a decision: count the turn, checkpoint, end the run if it said done."""
        task.turn += 1
        task.inflight = None
        if task.pending is not None:
            self.checkpoint(task, driver)
            raise StopRun(TaskStatus.WAITING, task.pending.question)
        if self.cancel.cancelled:
            raise StopRun(TaskStatus.INTERRUPTED, "interrupted", self.cancel.reason or None)
        self.checkpoint(task, driver)
        if decision.done:
            task.summary = decision.summary or task.summary
            task.result = decision.result if decision.result is not None else task.result
            raise StopRun(decision.status, task.summary or decision.status.value)

    def execute(self, task: Task, driver: Driver, ctx: RunContext, actions: list[Action],
                 parallel: bool, skip: frozenset[str] = frozenset(), fanout: int = 0) -> None:
        """Run actions in order; consecutive read-only ones together when `parallel`.

        Consecutive actions of a tool that runs together (`spawn`) always run together.

        A workflow fan-out (`fanout` > 0) runs every action together, at most
        `fanout` at a time, side-effecting or not: the workflow asked for it.
        """
        index = 0
        failed = False  # in order, a failure cancels what follows; in parallel, all run
        while index < len(actions):
            if task.pending is not None or self.cancel.cancelled or failed:
                for action in actions[index:]:
                    if action.key not in skip:
                        why = "not run: " + ("the task is waiting" if task.pending else
                                             "the run was interrupted" if self.cancel.cancelled
                                             else "an earlier action failed")
                        self.finish(task, driver, ctx, action,
                                     ActionResult(ResultStatus.CANCELLED, error=why))
                return
            group = [actions[index]]
            if fanout > 0:
                group = actions[index:]
            elif parallel and self._read_only(actions[index]):
                while index + len(group) < len(actions) and \
                        self._read_only(actions[index + len(group)]):
                    group.append(actions[index + len(group)])
            elif self.tools.runs_together(actions[index]):  # spawns: children run side by side
                while index + len(group) < len(actions) and \
                        self.tools.runs_together(actions[index + len(group)]):
                    group.append(actions[index + len(group)])
            index += len(group)
            todo = [a for a in group if a.key not in skip]
            if len(todo) > 1:
                from concurrent.futures import ThreadPoolExecutor  # only a fan-out needs it

                workers = min(fanout or MAX_PARALLEL, len(todo))
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    results = list(pool.map(lambda a: self._perform(ctx, a), todo))
            else:
                results = [self._perform(ctx, a) for a in todo]
            cut = [a for a, r in zip(todo, results, strict=True) if self._cut_short(a, r)]
            for action, result in zip(todo, results, strict=True):
                if action not in cut:
                    self.finish(task, driver, ctx, action, result)
                if not parallel and result.status in (ResultStatus.ERROR, ResultStatus.BLOCKED):
                    failed = True
            if cut:
                self._leave_unknown(ctx, cut)

    def _cut_short(self, action: Action, result: ActionResult) -> bool:
        """Whether a stop cut a side effect short, so that its outcome is unknown."""
        return self.cancel.cancelled and result.status is ResultStatus.CANCELLED and \
            not self._read_only(action)

    def _leave_unknown(self, ctx: RunContext, cut: list[Action]) -> None:
        """End the run with the cut-short side effects unfinished, as a hard kill would.

        One rule for every stop: their end is not journaled and the decision stays
        in flight, so `resume` finds them started and not finished and reports
        their outcome as unknown, for `on_interrupt` or the model to decide. A
        cancelled result would instead be run again by the resume, silently.
        """
        shown = ", ".join(f"`{a.text.splitlines()[0] if a.text else a.tool}`" for a in cut)
        ctx.emit(Notice(level="warning", message=(
            f"{shown} stopped while running: its outcome is unknown; `resume` leaves it to "
            "the workflow's on_interrupt or to the model")))
        raise StopRun(TaskStatus.INTERRUPTED, "interrupted", self.cancel.reason or None)

    def _perform(self, ctx: RunContext, action: Action) -> ActionResult:
        """Execute one action between its started and finished records."""
        read_only = self._read_only(action)
        crash_point("before_action")
        ctx.emit(ActionStarted(turn=ctx.task.turn, key=action.key, tool=action.tool,
                               command=action.text, action=action.to_dict(),
                               read_only=read_only), durable=not read_only)
        crash_point("action_started")
        refused = self._refused(action)
        if refused is not None:
            return refused

        def progressed(tail: list[str], counts: dict[str, int]) -> None:  # shown, not journaled
            ctx.emit(ActionProgressed(key=action.key, tail=tail, counts=counts))

        tool_ctx = replace(self.tool_ctx, on_progress=progressed)
        # a side effect run again (its step then counts its first run too), or one that
        # records a change made before it (`record`): its step counts from the last one
        again = action.key in self._rerun or self.tools.records_earlier(action)
        if not read_only and self.workspace_checkpoints is not None and not again:
            for event in self.workspace_checkpoints.before(ctx.task, action):
                ctx.emit(event)  # the step then counts only what changed during the action
        if not read_only:
            def spawned(pid: int) -> None:
                me = os.getpid()
                ctx.emit(ProcessStarted(key=action.key, pid=pid, started=procs.start_time(pid),
                                        owner=me, owner_started=procs.start_time(me)),
                         durable=True)

            def wrote(paths: set[str]) -> None:  # traced programs: what they wrote
                self._written.setdefault(action.key, set()).update(paths)

            def child(event: Event) -> None:  # a sub-task made or collected
                ctx.emit(event, durable=True)

            tool_ctx = replace(tool_ctx, on_spawn=spawned, on_writes=wrote, on_child=child,
                               emit=ctx.emit)
        guard = None if read_only else self._git_guard()
        if guard is not None:
            guard.before()
        try:
            result = self.tools.execute(action, tool_ctx, approved=action.key in self._approved)
        finally:
            undone = guard.after() if guard is not None else []
        crash_point("action_ran")
        result = self._guarded(ctx, action, result, undone)
        if self.hooks is not None:
            self.hooks.after_action(action, result)
        return result

    def _refused(self, action: Action) -> ActionResult | None:
        """The answer to an action that must not run: a body that never closed (answered with
        why), or a hook that said no (its reason goes to the driver); None: it runs."""
        why = rejection(action)
        if why is not None:
            return ActionResult.failure(why)
        if self.hooks is not None:
            reason = self.hooks.before_action(action)
            if reason is not None:
                return ActionResult.blocked(f"blocked by a hook: {reason}")
        return None

    @staticmethod
    def _guarded(ctx: RunContext, action: Action, result: ActionResult,
                 undone: list[Change]) -> ActionResult:
        """What the `.git` check found after the action, said: someone else's change is told
        and left; one the action made (a full-tier guard undid it) marks its result."""
        shown = (action.text.splitlines() or [action.tool])[0]
        if outside(undone):  # no program could: someone else's change, told and left
            ctx.emit(Notice(level="warning", message=f"`{shown}`: {describe_outside(undone)}"))
        elif undone:  # it ran, and changed what a person's git would run: undone, and said
            result = protected(result, undone)
            ctx.emit(Notice(level="warning", message=f"`{shown}` {describe(undone)}"))
        return result

    def _read_only(self, action: Action) -> bool:
        return read_only(self.tools, action)

    def approve(self, keys: set[str]) -> None:
        """The actions (by key) a person already approved: they run without asking again."""
        self._approved = set(keys)

    def rerun(self, keys: set[str]) -> None:
        """The side effects (by key) that run again after a stop: each one's step counts from
        the last checkpoint, so what its first run did before the stop is its own too."""
        self._rerun = set(keys)

    def _git_guard(self) -> GitGuard | None:
        """The `.git` fingerprint check, when programs may write the workspace."""
        if self.tool_ctx.sandbox.mode is not SandboxMode.WORKSPACE:
            return None
        if self._guard is None:  # the write guard refuses programs every change, in each tier
            from normalize.sandbox.tiers import probe  # the mechanism, where programs run

            prevented = probe().tier in (SandboxTier.FULL, SandboxTier.LANDLOCK)
            self._guard = GitGuard(self.tool_ctx.workspace, (self.store.home,),
                                   repair=not prevented)
        return self._guard

    def finish(self, task: Task, driver: Driver, ctx: RunContext, action: Action,
                result: ActionResult) -> None:
        """Record an action's end, hand it to the driver, and note a wait it raised."""
        event = action_finished(task.turn, action, result)
        if task.inflight is not None:
            self._keep_whole(task, event, result)
        ctx.emit(event, durable=not self._read_only(action))
        crash_point("action_finished")
        if not self._read_only(action) and (result.status not in (
                ResultStatus.BLOCKED, ResultStatus.CANCELLED) or "protected" in result.data):
            self._workspace(task, action)
        if result.wait is None or result.wait.kind == "child":
            task.actions_run += 1  # (one waiting for a person runs again once answered)
        if result.wait is None:
            driver.on_result(task, action, result)
        elif task.pending is None or result.wait.kind != "child":
            task.pending = result.wait
            ctx.emit(WaitingForInput(kind=result.wait.kind, question=result.wait.question,
                                     command=action.text or None))
            if self.hooks is not None:
                self.hooks.waiting(result.wait, action.text)
        # (a second sub-task waiting in the same decision waits with the first: the answer's
        # resume runs its spawn again too, `Recovery._ask_child`)

    def _keep_whole(self, task: Task, event: ActionFinished, result: ActionResult) -> None:
        """Keep the whole result, before its journal line, when that line would not carry it.

        Recovery hands a result finished after the last checkpoint to the driver
        again; the journal holds it redacted and cut to a preview, and what a
        driver keeps is executed state (house rule 11).
        """
        assert self._emitter is not None
        if event.preview == result.output and self._emitter.shown(event) is event:
            return
        self.store.keep_result(task.id, event.key, self._emitter.seq, result.to_dict())
        self._results_kept = True

    # -- checkpoints and the exit door -----------------------------------

    def checkpoint(self, task: Task, driver: Driver) -> None:
        assert self._emitter is not None and self._lock is not None
        journal = self._emitter.journal
        task.driver_state = driver.snapshot()
        task.seq = self._emitter.seq
        task.journal_offset = 0 if journal is None else journal.offset
        size = self.store.save(task, lock=self._lock, full=False)
        self._inflight_saved = None if task.inflight is None else \
            (copy.deepcopy(task.driver_state), task.journal_offset)
        if self._results_kept:  # saved with the driver's state: no record is needed again
            self.store.clear_results(task.id)
            self._results_kept = False
        self._emitter.emit(TaskSaved(turn=task.turn, bytes=size))
        if task.inflight is None:
            self._workspace(task)

    def _workspace(self, task: Task, action: Action | None = None, start: bool = False) -> None:
        """Record the workspace after a side effect or at the start (issue 15); never fails."""
        if self.workspace_checkpoints is not None:
            hook = self.workspace_checkpoints
            written = self._written.pop(action.key, None) if action else None
            events = hook.take(task, action, written=written) if action or start else \
                hook.settle(task)
            for event in events:
                self.emit(event)

    def finalize(self, task: Task, driver: Driver, status: TaskStatus, summary: str = "",
                 error: str | None = None, *, owned: bool = True,
                 trace: str | None = None) -> RunOutcome:
        """The single exit door: record the ending, save, announce, unlock, re-arm.

        `owned=False` (another process took the task over, or a save finds it
        did) writes nothing, neither the task nor the journal; the watchers
        still hear the end. `trace` (an internal error's traceback) is emitted
        as a notice just before `run_ended`. Whatever fails on the way, the
        lock is released and the cancel signal re-armed.
        """
        try:
            task.status = status
            if summary:
                task.summary = summary
            task.error = error
            task.elapsed = self._elapsed(task)
            if owned and status is TaskStatus.DONE:
                self._consolidate(task)
            if owned:
                try:
                    error = _joined(error, self._save_ending(task, driver, trace is not None))
                except StaleEpochError as exc:
                    owned, error = False, _joined(error, str(exc))
                except NormalizeError as exc:
                    error = _joined(error, str(exc))
                except Exception as exc:
                    error = _joined(error, f"cannot save the task: {type(exc).__name__}: {exc}")
            if not owned:
                self._detach_journal()
                status, task.summary = TaskStatus.FAILED, "stopped without saving"
            task.error = error
            self._run_end_hooks(task, status)
            self._announce(task, status, error, trace)
        finally:
            self._close()
        return RunOutcome(task, status, status.exit_status, task.summary, error)

    def _consolidate(self, task: Task) -> None:
        """A run that succeeded proposes what to remember (a failed one writes no lessons);
        said as events before the ending, so it is never silent. Its failure is a warning."""
        if self.consolidate is None or self._emitter is None:
            return
        try:
            for event in self.consolidate(task):
                self.emit(event)
        except Exception as exc:
            self.emit(Notice(level="warning", message=f"memory: nothing proposed: "
                                                      f"{type(exc).__name__}: {exc}"))

    def _run_end_hooks(self, task: Task, status: TaskStatus) -> None:
        """Tell `run_end` hooks how the run ended; a hook's failure never stops the ending."""
        if self.hooks is None or self._emitter is None:
            return
        try:
            self.hooks.run_end(task, status)
        except Exception as exc:
            self.emit(Notice(level="warning", message=f"run_end hooks: {exc}"))

    def _save_ending(self, task: Task, driver: Driver, traced: bool) -> str | None:
        """Save the ended task; a driver that cannot snapshot keeps its last checkpoint's state."""
        problem = None
        if task.inflight is not None and self._inflight_saved is not None:
            # the decision is still out: keep the state and journal position of its
            # checkpoint, so a resume feeds each finished result to the driver once
            task.driver_state, task.journal_offset = self._inflight_saved
        else:
            try:
                task.driver_state = driver.snapshot()
            except Exception as exc:
                problem = f"cannot snapshot the driver: {type(exc).__name__}: {exc}"
            task.journal_offset = 0 if self._journal is None else self._journal.offset
        if self._emitter is not None:
            task.seq = self._emitter.seq + 1 + traced  # the seq `run_ended` will get
        self.store.save(task, lock=self._lock)
        return problem

    def _announce(self, task: Task, status: TaskStatus, error: str | None,
                  trace: str | None) -> None:
        """Emit the ending; a journal that cannot take it is dropped, the watchers still hear it."""
        if self._emitter is None:
            return
        ending: list[Event] = [Notice(level="error", message=trace)] if trace else []
        ending.append(RunEnded(status=status.value, exit_code=int(status.exit_status),
                               summary=task.summary, error=error, turns=task.turn,
                               actions=task.actions_run,
                               duration=round(time.monotonic() - self._started, 6),
                               input_tokens=task.usage.input_tokens,
                               output_tokens=task.usage.output_tokens,
                               cost_usd=round(task.usage.cost_usd, 6),
                               result=task.result))
        for event in ending:
            try:
                self._emitter.emit(event)
            except Exception:
                self._detach_journal()
                self._emitter.emit(event)

    @property
    def _journal(self) -> Journal | None:
        return None if self._emitter is None else self._emitter.journal

    def _detach_journal(self) -> None:
        """Stop journaling (it failed, or is not ours); watchers still get every event."""
        journal = self._journal
        if journal is not None:
            assert self._emitter is not None
            self._emitter.journal = None
            journal.close()

    def _close(self) -> None:
        """Close the journal (and the workspace's watch), release the lock, re-arm the cancel
        signal, come what may."""
        try:
            if self.workspace_checkpoints is not None:
                self.workspace_checkpoints.close()
            if self._journal is not None:
                self._journal.close()
            if self._lock is not None:
                self.store.close_log(self._lock.task_id)
        finally:
            try:
                if self._lock is not None:
                    self._lock.release()
            finally:
                self.cancel.reset()

    def emit(self, event: Event) -> None:
        """Emit through the running task's emitter (for code driving the engine)."""
        if self._emitter is not None:
            self._emitter.emit(event)


def _joined(error: str | None, more: str | None) -> str | None:
    """Two problems as one line (either may be missing)."""
    if not more:
        return error
    return f"{error}; {more}" if error else more


NEXT_REQUEST = 1.25  # a sub-task's next request, guessed from its average so far


def _spent(task: Task, budget: float) -> bool:
    """Whether the task's budget is spent (with its children's spending).

    A sub-task's budget is promised out of its parent's, so it stops already
    before a request that could overrun it: one costing `NEXT_REQUEST` times what
    its requests did on average (a conversation's requests grow as it goes on).
    """
    used = task.usage
    if used.total_cost_usd >= budget:
        return True
    return task.parent is not None and used.requests > 0 and \
        used.total_cost_usd + NEXT_REQUEST * used.cost_usd / used.requests > budget


def _with_children(used: Usage) -> str:
    """`, $X of it by its sub-tasks` when children spent part of a task's budget."""
    return f", ${used.children_cost_usd:.4f} of it by its sub-tasks" \
        if used.children_cost_usd else ""

