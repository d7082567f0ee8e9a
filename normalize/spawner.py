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
in the workspace (the action ran again after a crash) is not applied twice.

Limits: `MAX_CHILDREN` per task, `MAX_DEPTH`, and budgets carved from the
parent's: a child's budget is at most what the parent has left after its own
spending and its other children's budgets (theirs or, once ended, what they
spent), so the children together never get more than the parent's budget.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from normalize.cancel import CancelToken
from normalize.children import (
    BUDGET_SHARE,
    DEFAULT_TURNS,
    MAX_CHILDREN,
    MAX_DEPTH,
    ChildOutcome,
    ChildSettings,
    SpawnRequest,
)
from normalize.errors import NormalizeError, ToolError
from normalize.events import BaseEvent, ChildCollected, ChildCreated
from normalize.execution.executor import ChildJob, Executor
from normalize.store import TaskStore
from normalize.store.ownership import pid_alive
from normalize.task import Limits, Task, TaskConfig, TaskStatus

Record = Callable[[BaseEvent], None]
SetModel = Callable[[dict[str, Any], str], None]  # puts `PROVIDER:MODEL` into an `llm` table

AT_REST = frozenset({TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.LIMIT, TaskStatus.STUCK,
                     TaskStatus.WAITING})
POLL = 0.05  # seconds between looks at a child another process runs
ATTEMPTS = 5  # runs of one child per collection (a stop, a lost race for its lock)


def child_id_for(parent_id: str, request: SpawnRequest) -> str:
    """The id of the child a parent's action starts: the same every time that action runs.

    The request is part of it, so a different spawn at the same place (the
    model's new decision after `resume --rewind`) makes a new child.
    """
    import hashlib  # (as the store does: loaded by the writes only)

    said = repr(sorted(asdict(request).items()))
    return hashlib.sha256(f"{parent_id}/{said}".encode()).hexdigest()[:8]


def private_places(home: Path, workspace: Path) -> tuple[Path, ...]:
    """normalize's own data a task's tools may not touch: the data home, less the workspace.

    An isolated child works in a copy under the data home; everything else
    there (the tasks, the shadow stores, other copies) stays out of reach.
    """
    home, workspace = home.resolve(), workspace.resolve()
    if home not in workspace.parents:
        return (home,)
    hidden: list[Path] = [home / name for name in ("tasks", "shadow", "cache", "reports")]
    inside = workspace.relative_to(home)
    for depth in range(len(inside.parts)):  # each folder from the home down to the workspace
        place = home.joinpath(*inside.parts[:depth])
        with contextlib.suppress(OSError):
            hidden += [p for p in place.iterdir() if p.name != inside.parts[depth]]
    return tuple(dict.fromkeys(p for p in hidden if p not in workspace.parents))


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
                 rules: ChildRules | None = None,
                 child_env: Callable[[str], dict[str, str]] | None = None) -> None:
        self.task = task
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
        child_id = child_id_for(self.task.id, request)
        with self._lock:
            if self._load(child_id) is None:
                self._create(child_id, request, record)
            if child_id not in self.task.children:
                self.task.children.append(child_id)
        stopped = self._run(child_id)
        return self._collect(child_id, record, stopped)

    # -- making a child ------------------------------------------------------

    def _load(self, child_id: str) -> Task | None:
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
                     driver="llm",  # a child is a model at work, whoever spawned it
                     config=self._config(request.model),
                     limits=Limits(max_turns=request.max_turns or self.rules.turns,
                                   max_cost_usd=self._budget(request.budget_usd)),
                     parent=self.task.id, child=settings, workflow=self.task.workflow)
        record(ChildCreated(key=request.key, child_id=child_id, goal=request.goal,
                            isolated=request.isolated, workspace=workspace))
        self.store.create(child)

    def _config(self, model: str | None) -> TaskConfig:
        """The child's configuration: the parent's (permissions, model), without its follow-ups."""
        spec = copy.deepcopy(self.task.config.spec)
        if model:
            spec = spec if spec is not None else {}
            self.set_model(spec.setdefault("llm", {}), model)
        return replace(self.task.config, spec=spec, follow_ups=())

    def _budget(self, asked: float | None) -> float | None:
        """The child's budget: what it asked for, within what the parent has left."""
        ceiling = self.task.limits.max_cost_usd
        if ceiling is None:
            return asked
        left = ceiling - self.task.usage.cost_usd
        for other in filter(None, map(self._load, self.task.children)):
            spent = other.usage.cost_usd
            left -= spent if other.status in AT_REST else max(other.limits.max_cost_usd or 0,
                                                               spent)
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

    def _run(self, child_id: str) -> bool:
        """Bring the child to rest: re-attach, or run it; whether the parent's stop cut it short."""
        for _ in range(ATTEMPTS):
            child = self._load(child_id)
            if child is None or child.status in AT_REST:
                return False
            running = self._runner(child_id)
            if running is not None:
                if self._await(running):
                    return True
                continue
            log = self.store.tasks_dir / child_id / "executor.log"
            log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            env = self.child_env(child_id) if self.child_env is not None else {}
            handle = self.executor.submit(ChildJob(child_id, str(self.store.home), self.flags,
                                                   str(log), env=env))
            while self.executor.collect(handle, POLL) is None:
                if self.cancel.cancelled:
                    self.executor.cancel(handle)
                    return True
        return False

    def _runner(self, child_id: str) -> int | None:
        """The pid of another live process running the child (one the parent started before)."""
        owner = self.store.owner(child_id)
        child = self._load(child_id)
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
        child = self._load(child_id)
        if child is None:
            return ChildOutcome(child_id, "failed", error="its task file is gone")
        outcome = ChildOutcome(child_id, child.status.value, child.summary,
                               child.usage.cost_usd, child.turn, error=child.error)
        settings = child.child or ChildSettings()
        if stopped:
            outcome.error = "stopped with its parent; `resume` the parent to continue it"
            return outcome
        if settings.isolated:
            self._merge_back(child, settings, outcome)
        if not self._collected_before(child_id):  # a re-run after a crash collects it again
            record(ChildCollected(key=settings.key, child_id=child_id, status=outcome.status,
                                  summary=outcome.summary, cost_usd=outcome.cost_usd,
                                  applied=outcome.applied, conflicts=outcome.conflicts))
        return outcome

    def _collected_before(self, child_id: str) -> bool:
        """Whether the parent's journal, since its last checkpoint, records collecting it."""
        return any(e.get("type") == "child_collected" and e.get("child_id") == child_id
                   for e in self.store.events_since(self.task))

    def _merge_back(self, child: Task, settings: ChildSettings, outcome: ChildOutcome) -> None:
        """Read the copy's diff, apply it (merge = apply, a child that ended well), drop it."""
        from normalize.checkpoints import isolate
        from normalize.checkpoints.shadow import ShadowRepo

        copy_dir = Path(child.workspace)
        if not copy_dir.is_dir():
            outcome.error = "its copy was collected before (the parent's earlier run)"
            return
        repo = ShadowRepo(Path(self.task.workspace), self.store.home)
        changes = isolate.changes(repo, settings.base, copy_dir)
        outcome.diff_stat = changes.stat
        if settings.merge == "apply" and child.status is TaskStatus.DONE and not changes.empty:
            with self._merge:
                outcome.conflicts = isolate.apply(repo, changes.patch, copy_dir.parent)
            outcome.applied = not outcome.conflicts
        if not settings.keep:
            isolate.remove_copy(copy_dir)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie no parent reaped does not)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True
