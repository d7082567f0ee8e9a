"""Starting, watching and collecting a task's sub-tasks (the `spawn` verb's service).

A child's id is derived from its parent's id and the action that asked for it,
so a parent that resumes after a crash runs that action again and finds the
same child: one that ended is collected, one whose process still runs is
waited for (re-attached), one that stopped is resumed. Each child's side
effects therefore happen once, by the child's own resume guarantees.

The parent's journal records `child_created` (fsynced) before the child's task
exists and `child_collected` when its outcome is taken. An isolated child works
in a copy made from the shadow store at the parent's last checkpoint
(`checkpoints/isolate.py`), under `copies/ID/` in the data home; with
`merge = "apply"` its diff is applied to the parent's workspace inside the
parent's action, so the parent's checkpoint after that action records it
(`diff PARENT` shows it, `undo PARENT` takes it back). A diff that is already
in the workspace (the action ran again after a crash) is not applied twice; a
merge a killed parent left half done is completed, or taken back, before any
child is merged (`checkpoints/landing.py`); one that cannot be written (a full
disk) writes nothing, keeps the copy, and makes the parent wait for a resume.

Limits: `MAX_CHILDREN` per task, `MAX_DEPTH`, and budgets carved from the
parent's: a child's budget is at most what the parent has left after its own
spending and its other children's budgets (reserved when each is made; once
one has ended, only what it spent), so the children together never get more
than the parent's budget. What they spent is the parent's
`usage.children_cost_usd`, counted against its own budget, so the parent
stops when it and its children together reach it. A child stops before a
request that, costing what its requests did on average, would overrun its
budget (the engine's `_spent`), so it keeps to what it was promised.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cancel import CancelToken
from normalize.errors import NormalizeError, ToolError
from normalize.events import ChildCollected, ChildCreated, Event
from normalize.execution.executor import ChildJob, Executor
from normalize.store import TaskStore
from normalize.store.ownership import pid_alive
from normalize.subtasks.attempts import best_of
from normalize.subtasks.children import (
    BUDGET_SHARE,
    DEFAULT_TURNS,
    MAX_CHILDREN,
    MAX_DEPTH,
    ChildOutcome,
    ChildSettings,
    SpawnRequest,
    child_id_for,
)
from normalize.task import Limits, Task, TaskConfig, TaskStatus

if TYPE_CHECKING:
    from normalize.checkpoints import isolate
    from normalize.sandbox import SandboxPolicy

Record = Callable[[Event], None]
SetModel = Callable[[dict[str, Any], str], None]  # puts `PROVIDER:MODEL` into an `llm` table
Judge = Callable[[str, str], int]  # runs a pick command in a copy: its exit status (-1: killed)

ENDED = frozenset({TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.LIMIT, TaskStatus.STUCK})
AT_REST = ENDED | {TaskStatus.WAITING}
POLL = 0.05  # seconds between looks at a child another process runs
ATTEMPTS = 5  # runs of one child per collection (a stop, a lost race for its lock)


def sandboxed_judge(policy: SandboxPolicy, store: TaskStore, *, timeout: float,
                    cancel: CancelToken, label: str) -> Judge:
    """Best-of-N's judge: a pick command run in an attempt's copy, sandboxed as its programs
    (`policy`, with normalize's own data hidden from that copy)."""

    def judge(workspace: str, command: str) -> int:
        import shlex

        from normalize.tools.run import run_process

        root = Path(workspace)
        confined = replace(policy, hidden=tuple(map(str, store.hidden_from(root))))
        try:
            outcome = run_process(shlex.split(command), cwd=root, timeout=timeout,
                                  cancel=cancel, sandbox=confined, workspace=root, label=label)
        except (ToolError, ValueError):  # it could not start (or its quotes never close)
            return 127
        ended = outcome.exit_code is not None and not (outcome.timed_out or outcome.cancelled)
        return outcome.exit_code if ended and outcome.exit_code is not None else -1

    return judge


@dataclass(frozen=True)
class ChildRules:
    """The limits on one task's children (settings with defaults)."""

    max_children: int = MAX_CHILDREN
    max_depth: int = MAX_DEPTH
    turns: int = DEFAULT_TURNS
    budget_share: float = BUDGET_SHARE


class Spawner:
    """Makes, runs and collects the children of one running task (see the module doc)."""

    def __init__(self, task: Task, store: TaskStore, executor: Executor, *,
                 cancel: CancelToken, set_model: SetModel, flags: tuple[str, ...] = (),
                 rules: ChildRules | None = None, judge: Judge | None = None,
                 child_env: Callable[[str], dict[str, str]] | None = None) -> None:
        self.task = task
        self.judge = judge  # best-of-N's pick command, run sandboxed in an attempt's copy
        self.child_env = child_env  # a child's extra environment (its trace context)
        self.set_model = set_model
        self.store = store
        self.executor = executor
        self.cancel = cancel
        self.flags = flags
        self.rules = rules or ChildRules()
        self._lock = threading.Lock()  # one child made at a time (limits, the children list)
        self._merge = threading.Lock()  # one diff applied at a time

    # -- the protocol ------------------------------------------------------

    def spawn(self, request: SpawnRequest, record: Record) -> ChildOutcome:
        if request.attempts > 1:
            return best_of(self, request, record)
        child_id = self.make(request, record)
        stopped = self.run(child_id, request.answer)
        return self._collect(child_id, record, stopped)

    def make(self, request: SpawnRequest, record: Record) -> str:
        """The child `request` asks for, made unless it exists (its action ran before)."""
        child_id = child_id_for(self.task.id, request)
        with self._lock:
            if self.load(child_id) is None:
                self._create(child_id, request, record)
            if child_id not in self.task.children:
                self.task.children.append(child_id)
        return child_id

    @property
    def max_children(self) -> int:
        return self.rules.max_children

    # -- making a child ------------------------------------------------------

    def load(self, child_id: str) -> Task | None:
        try:
            return self.store.load(child_id, with_config=False)
        except NormalizeError:
            return None

    def _create(self, child_id: str, request: SpawnRequest, record: Record) -> None:
        depth = (self.task.child.depth if self.task.child else 0) + 1
        if depth > self.rules.max_depth:
            raise ToolError(f"spawn refused: children may nest {self.rules.max_depth} deep "
                            f"and this task is at depth {depth - 1}")
        if len(self.task.children) >= self.rules.max_children:
            raise ToolError(f"spawn refused: this task has started its "
                            f"{self.rules.max_children} children already")
        settings = ChildSettings(key=request.key, depth=depth, isolated=request.isolated,
                                 merge=request.merge, keep=request.keep,
                                 origin=self.task.workspace)
        workspace = self.task.workspace
        if request.isolated:
            workspace, settings.base = self._copy(child_id)
        child = Task(id=child_id, goal=request.goal, workspace=workspace,
                     # a model at work, whoever spawned it; or a workflow's item, its steps
                     driver="workflow" if request.workflow is not None else "llm",
                     config=self._config(request.model, request.workflow),
                     limits=Limits(max_turns=request.max_turns or self.rules.turns,
                                   max_cost_usd=self._budget(request.budget_usd)),
                     parent=self.task.id, child=settings, workflow=self.task.workflow)
        record(ChildCreated(key=request.key, child_id=child_id, goal=request.goal,
                            isolated=request.isolated, workspace=workspace))
        self.store.create(child)

    def _config(self, model: str | None, steps: dict[str, Any] | None = None) -> TaskConfig:
        """The child's configuration: the parent's (permissions, model), without its follow-ups;
        `steps`, a workflow's item, in place of the parent's workflow."""
        spec = copy.deepcopy(steps if steps is not None else self.task.config.spec)
        if model:
            spec = spec if spec is not None else {}
            self.set_model(spec.setdefault("llm", {}), model)
        return replace(self.task.config, spec=spec, follow_ups=())

    def left(self) -> float | None:
        """What the parent's budget has left for children (None: it has no budget)."""
        ceiling = self.task.limits.max_cost_usd
        if ceiling is None:
            return None
        kids = filter(None, map(self.load, self.task.children))
        return ceiling - self.task.usage.cost_usd - sum(map(_promised, kids))

    def _budget(self, asked: float | None) -> float | None:
        """The child's budget: what it asked for, within what the parent has left."""
        ceiling, left = self.task.limits.max_cost_usd, self.left()
        if ceiling is None or left is None:
            return asked
        if left <= 0:
            raise ToolError(f"spawn refused: the task's budget (${ceiling:g}) is spent or "
                            f"promised to its children already")
        if asked is not None and asked > left:
            raise ToolError(f"spawn refused: --budget {asked:g} is more than the task has "
                            f"left for children (${left:.4f})")
        return asked if asked is not None else round(left * self.rules.budget_share, 6)

    def _copy(self, child_id: str) -> tuple[str, str]:
        """An isolated copy of the parent's workspace at its last checkpoint: (path, base tree)."""
        from normalize.checkpoints import isolate  # (loaded by isolated children only)
        from normalize.checkpoints.shadow import ShadowRepo

        repo = ShadowRepo(Path(self.task.workspace), self.store.home)
        base = isolate.current_tree(repo, self.task.id)
        dest = self.store.home / "copies" / child_id / Path(self.task.workspace).name
        isolate.remove_copy(dest)  # a copy half made before a crash
        isolate.make_copy(repo, base, dest)
        return str(dest), base

    # -- running it ------------------------------------------------------------

    def run(self, child_id: str, answer: str = "") -> bool:
        """Bring the child to rest: re-attach, or run it (a waiting one with `answer`, once);
        whether the parent's stop cut it short."""
        for _ in range(ATTEMPTS):
            child = self.load(child_id)
            flags = self.flags
            if child is not None and child.status is TaskStatus.WAITING and answer:
                flags, answer = (*flags, "--answer", answer), ""
            elif child is None or child.status in AT_REST:
                return False
            running = self._runner(child_id)
            if running is not None:
                if self._await(running):
                    return True
                continue
            log = self.store.tasks_dir / child_id / "executor.log"
            log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            env = self.child_env(child_id) if self.child_env is not None else {}
            handle = self.executor.submit(ChildJob(child_id, str(self.store.home), flags,
                                                   str(log), env=env))
            while self.executor.collect(handle, POLL) is None:
                if self.cancel.cancelled:
                    self.executor.cancel(handle)
                    return True
        return False

    def _runner(self, child_id: str) -> int | None:
        """The pid of another live process running the child (one the parent started before)."""
        owner = self.store.owner(child_id)
        child = self.load(child_id)
        if owner is None or child is None or child.status is not TaskStatus.RUNNING:
            return None
        pid = owner[0]
        return pid if pid != os.getpid() and _alive(pid) else None

    def _await(self, pid: int) -> bool:
        """Wait for another process to finish the child; stop it if the parent is stopped."""
        while _alive(pid):
            if self.cancel.cancelled:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                return True
            time.sleep(POLL)
        return False

    # -- collecting it -----------------------------------------------------------

    def _collect(self, child_id: str, record: Record, stopped: bool) -> ChildOutcome:
        child = self.load(child_id)
        if child is None:
            return ChildOutcome(child_id, "failed", error="its task file is gone")
        outcome = ChildOutcome(child_id, child.status.value, child.summary,
                               child.usage.total_cost_usd, child.turn, error=child.error)
        self.count_spending()
        settings = child.child or ChildSettings()
        if stopped:
            outcome.error = "stopped with its parent; `resume` the parent to continue it"
            return outcome
        if child.status is TaskStatus.WAITING:  # not collected: the parent waits on it
            outcome.question = child.pending.question if child.pending else child.summary
            return outcome
        if settings.isolated:
            self._merge_back(child, settings, outcome)
        earlier = self.collection(child_id)  # a re-run after a crash collects it again
        if earlier is None or earlier.applied != outcome.applied:
            record(ChildCollected(key=settings.key, child_id=child_id, status=outcome.status,
                                  summary=outcome.summary, cost_usd=outcome.cost_usd,
                                  applied=outcome.applied, conflicts=outcome.conflicts,
                                  diff_stat=outcome.diff_stat))
        if settings.isolated and not settings.keep and not outcome.unmerged:
            from normalize.checkpoints import isolate

            isolate.remove_copy(Path(child.workspace))  # once its collection is journaled
        return outcome

    def count_spending(self) -> None:
        """The parent's `children_cost_usd`: what its children (and theirs) spent, so far."""
        with self._lock:
            kids = list(filter(None, map(self.load, self.task.children)))
            self.task.usage.children_cost_usd = round(
                sum(kid.usage.total_cost_usd for kid in kids), 8)

    def collected_before(self, child_id: str) -> bool:
        """Whether the parent's journal, since its last checkpoint, records collecting it."""
        return self.collection(child_id) is not None

    def collection(self, child_id: str) -> ChildCollected | None:
        """The parent's journal's last record, since its last checkpoint, of collecting it."""
        found = [e for e in self.store.typed_events_since(self.task)
                 if isinstance(e, ChildCollected) and e.child_id == child_id]
        return found[-1] if found else None

    def _merge_back(self, child: Task, settings: ChildSettings, outcome: ChildOutcome) -> None:
        """Read the copy's diff and apply it (merge = apply, a child that ended well); a copy
        gone since a run a stop cut short merged it is taken as that run journaled it."""
        from normalize.checkpoints import landing

        copy_dir = Path(child.workspace)
        changes = self.changes(child)
        earlier = self.collection(child.id) if changes is None else None
        if earlier is not None and earlier.applied:
            outcome.applied, outcome.diff_stat = True, earlier.diff_stat
            return
        if changes is None:
            outcome.error = "its copy was collected before (the parent's earlier run)"
            return
        outcome.diff_stat = changes.stat
        if settings.merge == "apply" and child.status is TaskStatus.DONE and not changes.empty:
            try:
                outcome.conflicts = self.apply(changes, copy_dir)
            except landing.MergeError as exc:  # nothing written: the copy stays for a retry
                outcome.unmerged = str(exc)
                return
            outcome.applied = not outcome.conflicts

    def changes(self, child: Task) -> isolate.Changes | None:
        """What an isolated child changed in its copy (None: its copy is gone)."""
        from normalize.checkpoints import isolate
        from normalize.checkpoints.shadow import ShadowRepo

        settings = child.child or ChildSettings()
        copy_dir = Path(child.workspace)
        if not settings.isolated or not copy_dir.is_dir():
            return None
        repo = ShadowRepo(Path(self.task.workspace), self.store.home)
        return isolate.changes(repo, settings.base, copy_dir)

    def apply(self, changes: isolate.Changes, copy_dir: Path) -> list[str]:
        """Apply a child's changes to the parent's workspace, all or nothing; the conflicts."""
        from normalize.checkpoints import isolate, landing
        from normalize.checkpoints.shadow import ShadowRepo

        repo = ShadowRepo(Path(self.task.workspace), self.store.home)
        with self._merge:
            for kid in filter(None, map(self.load, self.task.children)):
                if kid.child is not None and kid.child.isolated:  # a killed run's merge lands
                    # (or goes) first, whichever child is merged now (another pick, say)
                    landing.settle(repo.workspace, Path(kid.workspace).parent / "merge.json")
            return isolate.apply(repo, changes.patch, copy_dir.parent)

    def copy_of(self, child_id: str) -> str:
        """The workspace of a child (an isolated one's copy)."""
        child = self.load(child_id)
        return child.workspace if child is not None else ""


def _promised(child: Task) -> float:
    """What a child takes of its parent's budget: its spending once ended, else at least its own
    budget (reserved before it starts, released to what it spent when it ends)."""
    spent = child.usage.total_cost_usd
    return spent if child.status in ENDED else max(child.limits.max_cost_usd or 0.0, spent)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie no parent reaped does not)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True
