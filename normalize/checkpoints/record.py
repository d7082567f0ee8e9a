"""Recording a task's workspace checkpoints, and reading them back as steps.

Each checkpoint is a commit on the task's ref (`refs/normalize/TASKID`) in
the workspace's shadow store. An action's commit has the workspace's tree;
a commit that carries the task's state (a run's start, a settled turn, an
undo or rewind) has a tree of `w` (the workspace) and `task.json` (the task
file as saved then, so `resume --rewind` can restore the task's own state). The commit message is
the step's metadata as JSON: step number, kind, turn, action key and command,
and the changed files with their `+/-` lines.

The engine calls `take` at the start of a run and after every side-effecting
action, `before` just before such an action, and `settle` after each
quiescent save. An action's step counts only what changed between its
`before` and its `take` (the `base` tree in its metadata): what a person or
another task changed between the task's actions is not the task's. When the
action's programs were traced (`normalize.sandbox.writes`), `take` is given
the paths they wrote and keeps only those: what anyone else changed during
the action is not the task's either; untraced, every change during the
action counts. Tasks may share a workspace; the workspace's checkpoint lock
orders their snapshots. None of the hooks raises: a failure is one warning
notice per run, and the task goes on.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.checkpoints.locks import clear_stale
from normalize.checkpoints.shadow import (
    CheckpointError,
    Settings,
    ShadowRepo,
    Snapshot,
    shown,
    write_private,
)
from normalize.checkpoints.watch import ChangeWatch
from normalize.events import CheckpointTaken, Event, Notice
from normalize.fsutil import FileFlock, LockTimeout, json_bytes
from normalize.task import Action, Task

LOCK_WAIT = 15.0
PRUNE_EVERY = 86400.0
MAX_CHANGES = 200  # paths listed in one checkpoint_taken event


def task_ref(task_id: str) -> str:
    return f"refs/normalize/{task_id}"


@dataclass
class WorkspaceStep:
    """One workspace checkpoint of a task."""

    number: int
    commit: str
    tree: str
    kind: str
    turn: int = 0
    key: str = ""
    tool: str = ""
    command: str = ""
    time: float = 0.0
    files: dict[str, list[int]] = field(default_factory=dict)
    state: str | None = None  # the blob of the task file at the end of this step's turn
    base: str | None = None  # the workspace just before this step's action (others' changes)
    mid_turn: bool = False  # later steps of the same turn came before its task state

    @classmethod
    def from_meta(cls, commit: str, meta: dict[str, Any]) -> WorkspaceStep:
        return cls(number=int(meta.get("step", 0)), commit=commit, tree=str(meta["tree"]),
                   kind=str(meta.get("kind", "action")), turn=int(meta.get("turn", 0)),
                   key=str(meta.get("key", "")), tool=str(meta.get("tool", "")),
                   command=str(meta.get("command", "")), time=float(meta.get("time", 0.0)),
                   files={str(k): list(v) for k, v in (meta.get("files") or {}).items()},
                   state=meta.get("state"), base=meta.get("base"))

    @property
    def by_task(self) -> bool:
        """Whether this step's changes were the task's (not a person's between runs)."""
        return self.kind in ("action", "undo", "rewind")


def read_steps(repo: ShadowRepo, task_id: str) -> list[WorkspaceStep]:
    """The task's checkpoints, oldest first; the task states attached to their steps."""
    if repo.read_ref(task_ref(task_id)) is None:
        return []
    steps: list[WorkspaceStep] = []
    waiting: list[WorkspaceStep] = []  # action steps whose turn has not settled yet
    for commit, meta in repo.log(task_ref(task_id)):
        if meta.get("kind") == "state":
            for earlier in waiting[:-1]:
                earlier.mid_turn = True
            for earlier in waiting:
                earlier.state = meta.get("state")
            waiting = []
            continue
        step = WorkspaceStep.from_meta(commit, meta)
        steps.append(step)
        if step.kind == "action":
            waiting.append(step)
        else:
            waiting = []
    return steps


class WorkspaceCheckpoints:
    """The engine's hook: records the workspace after each side effect, never failing."""

    available = True

    def __init__(self, repo: ShadowRepo, task_file: Callable[[str], Path]) -> None:
        self.repo = repo
        self.task_file = task_file
        self._tips: dict[str, tuple[str, int, str]] = {}  # task -> (commit, step, tree)
        self._before: dict[tuple[str, str], str] = {}  # (task, action key) -> tree before it
        self._before_ms: dict[tuple[str, str], float] = {}  # what recording it took
        self._cleared: list[Path] = []  # stale git locks cleared, not yet told
        self._pending: set[str] = set()
        self._warned = False
        self._told: set[str] = set()
        self._watch = ChangeWatch(repo.workspace)
        self._last: str | None = None  # the last recording's tree, while nothing changed since
        self._lock = FileFlock(repo.root.parent / f"{repo.root.name}.lock", timeout=LOCK_WAIT,
                               mode=0o600)

    @classmethod
    def for_workspace(cls, workspace: Path, home: Path, task_file: Callable[[str], Path],
                      settings: Settings | None = None) -> WorkspaceCheckpoints | None:
        """The recorder for a workspace, or None when checkpoints are turned off."""
        try:
            settings = settings or Settings.from_env()
            if not settings.enabled:
                return None
            return cls(ShadowRepo(workspace, home, settings), task_file)
        except CheckpointError as exc:  # no git, a bad setting: the task goes on without
            return _Unavailable(exc)

    # -- the hooks ---------------------------------------------------------

    def take(self, task: Task, action: Action | None = None, *,
             written: set[str] | None = None) -> list[Event]:
        """Record the workspace now: after `action`, or at the start of a run.

        `written` (absolute paths), when the action's programs were traced, keeps
        the step to the changes they made: what someone else changed meanwhile is
        not the task's.
        """
        try:
            return self._take(task, action, written)
        except Exception as exc:  # never the task's problem
            return self._failed(exc)

    def before(self, task: Task, action: Action) -> list[Event]:
        """Record the workspace just before a side effect, so its step counts only its own.

        When the watch saw nothing change since the last recording, that
        recording's tree is the tree just before, and no scan is needed.
        """
        started = time.perf_counter()
        try:
            if self._last is not None and not self._watch.drain():
                tree = self._last
            else:
                with self._locked():
                    tree = self._snapshot().tree
            self._before[(task.id, action.key)] = tree
            self._before_ms[(task.id, action.key)] = time.perf_counter() - started
        except Exception as exc:
            return self._failed(exc)
        return []

    def close(self) -> None:
        """Stop watching the workspace (the run ended)."""
        self._watch.close()
        self._last = None

    def _snapshot(self, *, full: bool = False) -> Snapshot:
        """Record the workspace (under the lock); the watch then says whether it changed since.

        The watch is armed, or drained, before the scan starts: a change during
        the scan is then an event, and the next `before` scans again.
        """
        self._last = None  # (until this scan ends well: what the drain saw is in it)
        if not self._watch.armed:
            self._watch.arm()
        else:
            self._watch.drain()
        snap = self.repo.snapshot(full=full)
        self._last = snap.tree if self._watch.armed else None
        return snap

    def settle(self, task: Task) -> list[Event]:
        """Keep the task's saved state with its last steps (at a quiescent checkpoint)."""
        if task.id not in self._pending:
            return []
        try:
            with self._locked():
                tip = self._tip(task.id)
                if tip is None:
                    return []
                commit, number, tree = tip
                state = self._state(task)
                meta = {"v": 1, "task": task.id, "kind": "state", "step": number,
                        "turn": task.turn, "tree": tree, "state": state, "time": time.time()}
                wrapper = self.repo.make_tree({"w": ("40000", tree),
                                               "task.json": ("100644", state)})
                new = self.repo.commit(wrapper, commit, meta)
                self.repo.set_ref(task_ref(task.id), new)
                self._tips[task.id] = (new, number, tree)
                self._pending.discard(task.id)
        except Exception as exc:
            return self._failed(exc)
        return []

    # -- the work ------------------------------------------------------------

    def _take(self, task: Task, action: Action | None,
              written: set[str] | None = None) -> list[Event]:
        started = time.perf_counter()  # (moved back by the snapshot just before the action)
        if action is not None:
            started -= self._before_ms.pop((task.id, action.key), 0.0)
        with self._locked():
            tip = self._tip(task.id)
            first = task.id not in self._tips or tip is None
            if action is None and tip is None:
                self._maybe_prune()
            snap = self._snapshot(full=first)
            kind = "action" if action is not None else "start" if tip is None else "resume"
            base = self._before.pop((task.id, action.key), None) if action else None
            since = base or (tip[2] if tip else None)  # an action counts from just before it
            if since is None:
                counts: dict[str, tuple[int, int]] = {}
            elif snap.counts is not None and snap.base == since:
                counts = snap.counts  # the listing counted them: no tree diff needed
            else:
                counts = self.repo.numstat(since, snap.tree)
            if written is not None:
                counts = {p: c for p, c in counts.items() if self._wrote(p, written)}
            files = {path: list(pair) for path, pair in counts.items()}
            number = 0 if tip is None else tip[1] + 1
            meta: dict[str, Any] = {
                "v": 1, "task": task.id, "kind": kind, "step": number, "turn": task.turn,
                "tree": snap.tree, "files": files, "time": time.time()}
            if base is not None:
                meta["base"] = base
            if action is not None:  # the workspace's tree itself: one object fewer
                meta.update(key=action.key, tool=action.tool, command=action.text)
                self._pending.add(task.id)
                root = snap.tree
            else:
                meta["state"] = self._state(task)
                root = self.repo.make_tree({"w": ("40000", snap.tree),
                                            "task.json": ("100644", meta["state"])})
                self._pending.discard(task.id)
            commit = self.repo.commit(root, tip[0] if tip else None, meta)
            self.repo.set_ref(task_ref(task.id), commit)
            self._tips[task.id] = (commit, number, snap.tree)
        events: list[Event] = [
            Notice(message=f"cleared a git lock a dead process left in the shadow store: {p}")
            for p in self._cleared]
        self._cleared = []
        for path, why in snap.skipped.items():
            if path not in self._told:
                self._told.add(path)
                events.append(Notice(message=f"checkpoints leave out {shown(path)} ({why})"))
        size = 0
        for path in files:
            with contextlib.suppress(OSError):
                size += os.lstat(self.repo.workspace / path).st_size
        listed = {shown(p): c for p, c in list(files.items())[:MAX_CHANGES]}
        events.insert(0, CheckpointTaken(
            step=number, turn=task.turn, key=action.key if action else "", kind=kind,
            files=len(files), added=sum(max(a, 0) for a, _ in files.values()),
            removed=sum(max(r, 0) for _, r in files.values()), bytes=size, changes=listed,
            skipped=sorted(shown(p) for p in snap.skipped),
            ms=round((time.perf_counter() - started) * 1000, 3)))
        return events

    def _wrote(self, rel: str, written: set[str]) -> bool:
        """Whether a traced program wrote `rel` (or renamed or removed a directory above it)."""
        path = os.path.join(os.fsdecode(self.repo.workspace), rel)
        while len(path) > len(os.fsdecode(self.repo.workspace)):
            if path in written:
                return True
            path = os.path.dirname(path)
        return False

    def _tip(self, task_id: str) -> tuple[str, int, str] | None:
        """The task's last checkpoint (commit, step number, workspace tree)."""
        known = self._tips.get(task_id)
        if known is not None:
            return known
        steps = read_steps(self.repo, task_id)
        head = self.repo.read_ref(task_ref(task_id))
        if not steps or head is None:
            return None
        return head, steps[-1].number, steps[-1].tree

    def _state(self, task: Task) -> str:
        """Store the task file as last saved; its blob id."""
        import json

        from normalize.store import ckptlog

        path = self.task_file(task.id)
        try:
            stored = json.loads(path.read_bytes())
            # the file and the newer records appended after it (the store's checkpoint log)
            newer = ckptlog.latest(path.with_suffix(".ckpt"), stored.get("log_gen"))
            stored = newer if newer is not None else stored
            stored.pop("log_gen", None)
            data = json_bytes(stored)
        except (OSError, ValueError):
            data = json_bytes(task.to_dict())
        return self.repo.write_object("blob", data)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the workspace's checkpoint lock; git locks a dead holder left are cleared."""
        self.repo.private_dirs()
        with self._lock:
            self._cleared += clear_stale(self.repo.root, self.repo.git_dir)
            yield

    def _failed(self, exc: BaseException) -> list[Event]:
        if isinstance(exc, LockTimeout):
            why = "another task in this workspace held the checkpoint lock too long"
        elif isinstance(exc, CheckpointError):
            why = str(exc)
        else:
            why = f"{type(exc).__name__}: {exc}"
        if self._warned:
            return []
        self._warned = True
        return [Notice(level="warning",
                       message=f"workspace checkpoint failed ({why}); the task goes on, but "
                               "`normalize diff`/`undo` may miss this step")]

    def _maybe_prune(self) -> None:
        """Drop old tasks' checkpoints now and then (age and count are settings)."""
        stamp = self.repo.root / "pruned"
        try:
            if time.time() - stamp.stat().st_mtime < PRUNE_EVERY:
                return
        except FileNotFoundError:
            self.repo.ensure()
            write_private(stamp, b"")
            return
        prune(self.repo)
        write_private(stamp, b"")


class _Unavailable(WorkspaceCheckpoints):
    """Checkpoints that cannot work here: one warning, then silence."""

    available = False

    def __init__(self, error: CheckpointError) -> None:  # no repository to open
        self.error = error
        self._warned = False

    def take(self, task: Task, action: Action | None = None, *,  # noqa: ARG002
             written: set[str] | None = None) -> list[Event]:  # noqa: ARG002
        return self._failed(self.error)

    def before(self, task: Task, action: Action) -> list[Event]:  # noqa: ARG002
        return []

    def settle(self, task: Task) -> list[Event]:  # noqa: ARG002
        return []

    def close(self) -> None:
        pass


def prune(repo: ShadowRepo, now: float | None = None) -> list[str]:
    """Delete the refs of tasks past the age or count limits, then their objects; their ids."""
    settings = repo.settings
    now = time.time() if now is None else now
    proc = repo.run("for-each-ref", "--format=%(refname) %(committerdate:unix)",
                    "--sort=-committerdate", "refs/normalize/")
    dropped: list[str] = []
    for number, line in enumerate(proc.stdout.decode().splitlines()):
        name, _, stamp = line.rpartition(" ")
        old = now - float(stamp or 0) > settings.keep_days * 86400
        if old or number >= settings.keep_tasks:
            repo.run("update-ref", "-d", name, check=False)
            dropped.append(name.rsplit("/", 1)[-1])
    if dropped:
        repo.run("gc", "--quiet", "--prune=now", check=False)
    return dropped
