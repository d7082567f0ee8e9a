"""What a task changed, and taking it back: diffs, undo and rewind over its checkpoints.

"The files the task changed" are the paths its own steps (actions, undo,
rewind) changed, each counted from just before its action; what a person or
another task changed between them is never the task's. Undo puts those files
back as they were just before the task first changed them (after the target
step), one by one, through `restore.py` (race-free, journaled): a file whose
content is no longer what the task last left is refused by name unless
forced. Undo is recorded as a step itself, so it can be undone in turn
(`undo --to` the step before it).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.checkpoints.record import WorkspaceCheckpoints, WorkspaceStep, read_steps, task_ref
from normalize.checkpoints.restore import (
    UndoIntent,
    apply_restore,
    drop_intent,
    encode,
    entry_state,
    leftovers,
    load_intent,
    resume_intent,
    save_intent,
    state_of,
)
from normalize.checkpoints.shadow import CheckpointError, Entry, ShadowRepo, shown
from normalize.errors import UsageError
from normalize.events import CheckpointTaken, Emitter, Event, TaskRewound
from normalize.store import TaskStore, atomic_write_bytes, ckptlog
from normalize.task import Task

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class TaskChanges:
    """A task's checkpoints in its workspace's shadow store."""

    task: Task
    repo: ShadowRepo
    steps: list[WorkspaceStep]

    @classmethod
    def open(cls, store: TaskStore, task: Task) -> TaskChanges:
        repo = ShadowRepo(Path(task.workspace), store.home)
        steps = read_steps(repo, task.id) if repo.git_dir.is_dir() else []
        if not steps:
            raise UsageError(f"task {task.id} has no workspace checkpoints (it ran before "
                             "they existed, or with NORMALIZE_CHECKPOINTS=off)")
        return cls(task, repo, steps)

    def step(self, number: int) -> WorkspaceStep:
        for step in self.steps:
            if step.number == number:
                return step
        last = self.steps[-1].number
        raise UsageError(f"step {number}: task {self.task.id} has steps 0 to {last}")

    def previous(self, step: WorkspaceStep) -> WorkspaceStep:
        index = self.steps.index(step)
        return self.steps[index - 1] if index else step

    def task_paths(self, after: int = -1) -> list[str]:
        """The paths the task's own steps changed (after step `after`), in order."""
        seen: dict[str, None] = {}
        for step in self.steps:
            if step.number > after and step.by_task:
                seen.update(dict.fromkeys(step.files))
        return list(seen)

    def spans(self, number: int | None) -> list[tuple[str, str, list[str]]]:
        """The trees a diff compares, with their paths: one step's, or the task's per path.

        A step compares the workspace just before its action with just after. The
        whole task compares each path from before the task first changed it to
        after the task last did, so what others did around it is not shown as its.
        """
        if number is None:
            first, last = _touched(self, -1)
            pairs: dict[tuple[str, str], list[str]] = {}
            for path, old in first.items():
                pairs.setdefault((old, last[path]), []).append(path)
            return [(old, new, paths) for (old, new), paths in pairs.items()]
        step = self.step(number)
        return [(step.base or self.previous(step).tree, step.tree, list(step.files))]

    def patch(self, number: int | None = None) -> str:
        return "".join(self.repo.patch(old, new, paths) for old, new, paths in self.spans(number))

    def net_entries(self) -> tuple[dict[str, Entry | None], dict[str, Entry | None]]:
        """Each path the task changed as it was before the task's first change, and after its
        last (None: absent): the task's net change, file by file."""
        first, last = _touched(self, -1)
        return _entries(self.repo, first), _entries(self.repo, last)

    def numstat(self, number: int | None = None) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for old, new, paths in self.spans(number):
            wanted = set(paths)
            out.update((p, c) for p, c in self.repo.numstat(old, new).items() if p in wanted)
        return out


QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def git_unquote(name: str) -> str:
    """A path as git prints it, C-quoted (`"a/x\\033y"`) when it holds a control character,
    back to its text (`a/x\x1by`); an unquoted path as it is."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    out = bytearray()
    body, at = name[1:-1], 0
    while at < len(body):
        char = body[at]
        if char != "\\" or at + 1 == len(body):
            out += char.encode("utf-8", "surrogateescape")
            at += 1
        elif body[at + 1] in "01234567":
            out.append(int(body[at + 1:at + 4], 8) & 0xFF)
            at += 4
        else:
            out.append(_C_ESCAPES.get(body[at + 1], ord(body[at + 1])))
            at += 2
    return out.decode("utf-8", "replace")


def readable_patch(patch: str) -> str:
    """`patch` with the paths git C-quoted in its file lines given back as text (to be shown
    inert like every other name: one placeholder style, not git's octal)."""
    def plain(line: str) -> str:
        if not line.startswith(("diff --git ", "--- ", "+++ ", "rename ", "copy ")):
            return line
        return QUOTED.sub(lambda m: git_unquote(m.group()).replace("\n", "\\n"), line)
    return "\n".join(map(plain, patch.split("\n"))) if '"' in patch else patch


def parse_patch(text: str) -> list[dict[str, Any]]:
    """A unified diff as files and hunks (the `--json` form of `normalize diff`)."""
    files: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    hunk: dict[str, Any] | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            current = {"path": "", "status": "modified", "binary": False, "added": 0,
                       "removed": 0, "hunks": []}
            files.append(current)
            hunk = None
            quoted = QUOTED.match(line, len("diff --git "))
            rest = line[len("diff --git a/"):]
            current["path"] = (git_unquote(quoted.group())[2:] if quoted
                               else rest[: (len(rest) - 3) // 2])
        elif current is None:
            continue
        elif hunk is None and line.startswith(("+++ ", "--- ")):
            if line[4:] != "/dev/null":
                current["path"] = git_unquote(line[4:])[2:]
        elif hunk is None and line.startswith("new file mode"):
            current["status"] = "added"
        elif hunk is None and line.startswith("deleted file mode"):
            current["status"] = "deleted"
        elif line.startswith("Binary files "):
            current["binary"] = True
        elif (match := HUNK.match(line)) is not None:
            hunk = {"header": line, "old_start": int(match.group(1)),
                    "new_start": int(match.group(3)), "lines": []}
            current["hunks"].append(hunk)
        elif hunk is not None:
            hunk["lines"].append(line)
            if line.startswith("+"):
                current["added"] += 1
            elif line.startswith("-"):
                current["removed"] += 1
    return files


# -- undo -----------------------------------------------------------------------------------


@dataclass
class UndoResult:
    """What an undo did: files restored, refused (changed since, or a link on the way), the step."""

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # of `restored`: the task had created them
    refused: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # path -> why nothing was written
    step: int | None = None
    resumed: bool = False  # it completed an undo that was interrupted


def _touched(changes: TaskChanges, after: int) -> tuple[dict[str, str], dict[str, str]]:
    """For each path the task changed after step `after`: the tree before its first change
    (the step's own `base`, so what others did before it stays theirs) and after its last."""
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for index, step in enumerate(changes.steps):
        if step.number <= after or not step.by_task:
            continue
        before = step.base or (changes.steps[index - 1].tree if index else step.tree)
        for path in step.files:
            first.setdefault(path, before)
            last[path] = step.tree
    return first, last


def _entries(repo: ShadowRepo, trees: dict[str, str]) -> dict[str, Entry | None]:
    """`path -> Entry` of each path in its own tree (one `ls-tree` per tree)."""
    grouped: dict[str, list[str]] = {}
    for path, tree in trees.items():
        grouped.setdefault(tree, []).append(path)
    out: dict[str, Entry | None] = {}
    for tree, paths in grouped.items():
        found = repo.entries(tree, paths)
        out.update((p, found.get(p)) for p in paths)
    return out


def plan_restore(changes: TaskChanges, target: WorkspaceStep, *, force: bool
                 ) -> tuple[dict[str, Entry | None], list[str], list[str]]:
    """Which files to put back as at `target`: (path -> entry, refused, unchanged).

    Only paths the task's own steps changed after `target` count; each goes back
    to what it held just before the task's first change to it, and is refused
    when its content is no longer what the task's last change left.
    """
    first, last = _touched(changes, target.number)
    want, left = _entries(changes.repo, first), _entries(changes.repo, last)
    todo: dict[str, Entry | None] = {}
    refused: list[str] = []
    unchanged: list[str] = []
    for rel in first:
        now = state_of(changes.repo.workspace, rel)
        if now == entry_state(want[rel]):
            unchanged.append(rel)
        elif not force and now != entry_state(left[rel]):
            refused.append(rel)
        else:
            todo[rel] = want[rel]
    return todo, refused, unchanged


def _intent(changes: TaskChanges, target: WorkspaceStep,
            todo: dict[str, Entry | None]) -> UndoIntent:
    workspace = changes.repo.workspace
    return UndoIntent(task=changes.task.id, target=target.number,
                      paths={p: encode(e) for p, e in todo.items()},
                      before={p: state_of(workspace, p) for p in todo})


def undo(store: TaskStore, task: Task, to_step: int | None = None, *,
         force: bool = False) -> UndoResult:
    """Put the files the task changed back as before it (or as after step `to_step`).

    An undo that was interrupted is completed first (its journal says what it
    meant), whatever `to_step` and `force` say now.
    """
    changes = TaskChanges.open(store, task)
    repo = changes.repo
    lock = store.lock(task.id)  # not while the task runs
    lock.acquire(epoch=task.epoch + 1)
    try:
        intent = load_intent(repo, task.id)
        result = UndoResult(resumed=intent is not None)
        if intent is None:
            target = changes.steps[0] if to_step is None else changes.step(to_step)
            todo, result.refused, result.unchanged = plan_restore(changes, target, force=force)
            intent = _intent(changes, target, todo)
            if todo:
                save_intent(repo, intent)
        else:
            leftovers(repo.workspace, list(intent.paths))
            todo, done, result.refused = resume_intent(repo.workspace, intent)
            result.restored = done
        restored, result.blocked = apply_restore(repo, todo)
        result.restored += restored
        result.removed = [p for p in result.restored if not intent.paths.get(p)]
        if result.restored:
            event = record_step(store, task, "undo", intent.target, result.restored)
            result.step = event.step if event is not None else None
        if not result.blocked:
            drop_intent(repo, task.id)
    finally:
        lock.release()
    return result


def record_step(store: TaskStore, task: Task, kind: str, target: int, paths: list[str],
                state: bytes | None = None) -> CheckpointTaken | None:
    """Record a step the CLI made (an undo, a rewind) on the task's ref, and journal it.

    Only `paths` (the files it restored) count as its changes: whatever else
    differs since the last step was a person's doing.
    """
    recorder = WorkspaceCheckpoints.for_workspace(Path(task.workspace), store.home,
                                                  store.task_path)
    if recorder is None or not recorder.available:
        return None
    repo = recorder.repo
    with recorder._locked():
        head = repo.read_ref(task_ref(task.id))
        steps = read_steps(repo, task.id)
        snap = repo.snapshot()
        files = {p: list(c) for p, c in repo.numstat(steps[-1].tree, snap.tree).items()
                 if p in set(paths)}
        number = steps[-1].number + 1
        data = state if state is not None else store.task_path(task.id).read_bytes()
        blob = repo.write_object("blob", data)
        meta = {"v": 1, "task": task.id, "kind": kind, "step": number, "turn": task.turn,
                "tree": snap.tree, "files": files, "time": time.time(), "state": blob,
                "target": target}
        tree = repo.make_tree({"w": ("40000", snap.tree), "task.json": ("100644", blob)})
        repo.set_ref(task_ref(task.id), repo.commit(tree, head, meta))
    event = CheckpointTaken(step=number, turn=task.turn, kind=kind, files=len(files),
                            added=sum(max(a, 0) for a, _ in files.values()),
                            removed=sum(max(r, 0) for _, r in files.values()),
                            changes={shown(p): c for p, c in files.items()})
    journal_event(store, task, event)
    return event


def journal_event(store: TaskStore, task: Task, event: Event) -> Event:
    """Append one event to the task's journal, stamped after its last one (lock held)."""
    journal = store.journal(task.id)
    try:
        emitter = Emitter(task.id, seq=store.last_seq(task), journal=journal)
        return emitter.emit(event, durable=True)
    finally:
        journal.close()


# -- rewind ---------------------------------------------------------------------------------


def rewind_task(store: TaskStore, task: Task, number: int) -> Task:
    """Restore the files and the task's own state to step `number`; the task to resume.

    Refuses as a whole (changing nothing) when a person changed one of the
    files since the task last touched it, or when the step has no saved task
    state. The journal keeps every event; a `task_rewound` event marks the
    ones after the step as rewound.
    """
    changes = TaskChanges.open(store, task)
    target = changes.step(number)
    if target.mid_turn:
        raise UsageError(f"step {number} is in the middle of turn {target.turn}; rewind to the "
                         "last step of that turn, or to an earlier one")
    if target.state is None:
        raise UsageError(f"step {number} has no saved task state (its turn never finished)")
    todo, refused, _ = plan_restore(changes, target, force=False)
    if refused:
        raise UsageError(f"cannot rewind task {task.id}: changed since the task last touched "
                         f"it: {', '.join(map(shown, refused))} (undo --force, or restore "
                         "them by hand)")
    lock = store.lock(task.id)
    lock.acquire(epoch=task.epoch + 1)
    try:
        state = changes.repo.blobs([target.state])[target.state]
        restored, blocked = apply_restore(changes.repo, todo)
        if blocked:
            raise CheckpointError(f"cannot rewind task {task.id}: " + "; ".join(
                f"refused {shown(p)}: {why}" for p, why in blocked.items()))
        atomic_write_bytes(store.task_path(task.id), state, fsync=store.fsync)
        ckptlog.remove(store.log_path(task.id))  # its records came after the restored state
        rewound = store.load(task.id)
        journal_event(store, rewound, TaskRewound(step=number, turn=rewound.turn,
                                                  after_seq=rewound.seq,
                                                  files=[shown(p) for p in restored]))
        record_step(store, rewound, "rewind", number, restored, state=state)
    finally:
        lock.release()
    return store.load(task.id)
