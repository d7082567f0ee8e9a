"""`normalize tasks`: the table of tasks, from the task index.

A listing of 10,000 tasks should cost little more than one of ten: it works
on the index's rows as they were parsed (no object per task), redacts the
shown strings of a workspace in one pass, and writes the table at once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.console import Environment
from normalize.errors import ExitStatus
from normalize.statuses import TaskStatus
from normalize.store.index import (
    CREATED,
    DRIVER,
    GOAL,
    ID,
    PARENT,
    QUESTION,
    STATUS,
    TURN,
    UPDATED,
    WORKSPACE,
    Row,
)

if TYPE_CHECKING:
    from normalize.store import StoreProblem, TaskStore

AGES = (("d", 86400), ("h", 3600), ("m", 60))
UNCUT = 1 << 20  # a width that cuts no goal
TABLE_ROWS = 50
"""The newest tasks the table shows by default; `--all` shows every one, `--limit N` N."""


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, with `…` where it was cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def short_path(path: str, width: int) -> str:
    """A directory as a person knows it: `~/…` for the home, cut from the left to `width`."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home):]
    return path if len(path) <= width else "…" + path[-(width - 1):]


def age(ts: float, now: float) -> str:
    seconds = max(0.0, now - ts)
    for unit, size in AGES:
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def orphaned(store: TaskStore, row: Row) -> int | None:
    """The pid of the dead process a `running` task was left by, if it is gone."""
    if row[STATUS] != TaskStatus.RUNNING:
        return None
    from normalize.store.taskstore import pid_alive

    owner = store.owner(row[ID])
    if owner is None or pid_alive(owner[0]):
        return None
    return int(owner[0])


def _shown(redact: Callable[[str], str]) -> Callable[[str], str]:
    """`redact`, then `inert`: what a listing shows of a task's strings."""
    from normalize.redact import inert

    return lambda text: inert(redact(text))


def newest_first(rows: list[Row], workspace: str | None = None) -> list[Row]:
    """The rows by when each task last changed (the UPDATED column), newest first; ties by
    creation, then id. With `workspace`, only the tasks of that directory."""
    if workspace is not None:
        rows = [r for r in rows if r[WORKSPACE] == workspace]
    return sorted(rows, key=lambda r: (r[UPDATED] or 0.0, r[CREATED] or 0.0, r[ID]),
                  reverse=True)


def shown_rows(store: TaskStore, limit: int | None = None, workspace: str | None = None
               ) -> tuple[list[Row], int, list[StoreProblem]]:
    """The store's newest `limit` task rows (all by default), their shown strings redacted
    and inert, and how many rows there are in all.

    The strings a redactor would leave alone are most of them: each
    workspace's goals and questions are redacted joined, one line each, and
    only when that changes anything one by one (a secret stays a secret
    across a line break; the shapes match within a line as they do alone).
    """
    from normalize.redact import Redactor

    rows, problems = store.rows()
    rows = newest_first(rows, workspace)
    total = len(rows)
    if limit is not None:  # older tasks that wait for a person or run stay in view
        live = (TaskStatus.WAITING, TaskStatus.RUNNING)
        rows = rows[:limit] + [r for r in rows[limit:] if r[STATUS] in live]
    by_workspace: dict[str, list[Row]] = {}
    for row in rows:
        workspace = row[WORKSPACE] or ""
        group = by_workspace.get(workspace)
        if group is None:
            group = by_workspace[workspace] = []
        group.append(row)
    for workspace, group in by_workspace.items():
        # shapes and the environment only: a fast listing
        redactor = _shown(store.redact or Redactor.for_workspace(workspace, walk=False).redact_obj)
        _redact_group(group, workspace, redactor)
    return rows, total, problems


def _redact_group(group: list[Row], workspace: str, redactor: Callable[[str], str]) -> None:
    """One workspace's rows: goals and questions redacted when joined they hold a secret, and
    the workspace's own path."""
    texts = [str(row[GOAL]) for row in group if row[GOAL]]
    texts += [str(row[QUESTION]) for row in group if row[QUESTION]]
    joined = "\n".join(texts)
    if redactor(joined) != joined:
        for row in group:
            for key in (GOAL, QUESTION):
                if row[key]:
                    row[key] = redactor(str(row[key]))
    shown = redactor(workspace) if workspace else workspace
    if shown != workspace:
        for row in group:
            row[WORKSPACE] = shown


def list_tasks(env: Environment, *, json_output: bool, limit: int | None = None,
               show_all: bool = False, workspace: str | None = None, flat: bool = False) -> int:
    """The newest `limit` tasks (the table: TABLE_ROWS unless `show_all`; JSON: all), of
    every workspace or of `workspace` alone; sub-tasks under their parent unless `flat`."""
    from normalize.store import TaskStore

    store = TaskStore()
    if show_all or (json_output and limit is None):
        limit = None
    elif limit is None:
        limit = TABLE_ROWS
    rows, total, problems = shown_rows(store, limit, workspace)
    for problem in problems:
        env.stderr.write(f"normalize: warning: {problem.message}\n")
    if json_output:
        env.stdout.write("".join(json.dumps({
            "id": row[ID], "status": row[STATUS], "goal": row[GOAL], "driver": row[DRIVER],
            "workspace": row[WORKSPACE], "turn": row[TURN], "updated_at": row[UPDATED],
            "question": row[QUESTION], "orphaned": orphaned(store, row) is not None,
            "parent": row[PARENT],
        }) + "\n" for row in rows))
        return 0
    if not rows:
        env.stdout.write("no tasks yet\n" if workspace is None else
                         f"no tasks in {workspace}\n")
        return 0
    import shutil  # (loaded with typer already)

    # a terminal's width (or COLUMNS, asked for); a pipe's reader wants whole lines (`| grep`)
    cut_to = env.stdout_tty or "COLUMNS" in env.env
    width = shutil.get_terminal_size((100, 24)).columns if cut_to else UNCUT
    env.stdout.write(table(store, rows, width, flat=flat))
    if total > len(rows):
        older = total - len(rows)
        env.stdout.write(f"… and {older:,} older task{'s' if older > 1 else ''} "
                         f"(normalize tasks --all, or --limit N)\n")
    return 0


def table(store: TaskStore, rows: list[Row], width: int, *, flat: bool = False) -> str:
    """The listing as one string: a header, a line per task, its question and warnings.

    Sub-tasks stand indented under their parent; `flat` keeps the order of the rows."""
    room = max(width - (9 + 14 + 14 + 9 + 24 + 5), 20)
    places: dict[str, str] = {}  # a workspace as the column shows it, once per workspace
    now = time.time()
    lines = [f"{'ID':<9} {'STATUS':<14} {'DRIVER':<14} {'UPDATED':<9} {'WORKSPACE':<24} GOAL\n"]
    for row, depth in [(row, 0) for row in rows] if flat else nested(rows):
        workspace = row[WORKSPACE]
        place = places.get(workspace)
        if place is None:
            place = places[workspace] = short_path(workspace, 24)
        goal = row[GOAL] or ""
        if "\n" in goal or "\r" in goal:
            goal = goal.splitlines()[0] if goal.strip() else ""
        if depth:
            goal = "  " * (depth - 1) + "└ " + goal
        lines.append(f"{row[ID]:<9} {row[STATUS]:<14} {row[DRIVER]:<14} "
                     f"{age(row[UPDATED] or 0.0, now):<9} {place:<24} {cut(goal, room)}\n")
        if row[QUESTION] is not None:
            lines.append(f"{'':<9} ? {row[QUESTION]}\n")
        if row[STATUS] == TaskStatus.RUNNING:
            gone = orphaned(store, row)
            if gone is not None:
                lines.append(f"{'':<9} ! its process ({gone}) is gone; `normalize resume "
                             f"{row[ID]}` recovers it\n")
    return "".join(lines)


def nested(rows: list[Row]) -> list[tuple[Row, int]]:
    """The rows with each sub-task right under its parent (oldest child first), and its depth.

    A child whose parent is not among the rows stands where it is, at depth 0.
    """
    shown = {row[ID] for row in rows}
    children: dict[str, list[Row]] = {}
    for row in reversed(rows):  # rows are newest first; children read oldest first
        parent = row[PARENT] if len(row) > PARENT else None
        if isinstance(parent, str) and parent in shown and parent != row[ID]:
            children.setdefault(parent, []).append(row)
    out: list[tuple[Row, int]] = []

    def place(row: Row, depth: int) -> None:
        out.append((row, depth))
        for child in children.get(row[ID], []):
            if depth < 8:  # a loop of parents in damaged files ends here
                place(child, depth + 1)

    placed = {id(c) for group in children.values() for c in group}
    for row in rows:
        if id(row) not in placed:
            place(row, 0)
    return out


STATUSES = tuple(status.value for status in (
    TaskStatus.WAITING, TaskStatus.RUNNING, TaskStatus.DONE, TaskStatus.FAILED,
    TaskStatus.INTERRUPTED, TaskStatus.LIMIT, TaskStatus.STUCK))


def remove_tasks(env: Environment, task: str | None, status: str | None,
                 workspace: Path | None) -> int:
    """`tasks rm --status S [-w DIR]`: remove every task in status S (of DIR), each by name."""
    from normalize.errors import NormalizeError
    from normalize.store import TaskStore

    if task is not None or status is None:
        why = "give a TASK or --status STATUS" if task is None else \
            "give a TASK or --status STATUS, not both"
        env.stderr.write(f"normalize: error: tasks rm: {why}\n")
        return int(ExitStatus.USAGE)
    if status not in STATUSES:
        env.stderr.write(f"normalize: error: --status {status}: not a status (one of "
                         f"{', '.join(STATUSES)})\n")
        return int(ExitStatus.USAGE)
    store = TaskStore()
    rows, _ = store.rows()
    where = None if workspace is None else str(workspace.resolve())
    chosen = [r for r in newest_first(rows, where) if r[STATUS] == status]
    failed = 0
    for row in chosen:
        try:
            store.remove(row[ID])
        except NormalizeError as exc:
            failed += 1
            env.stderr.write(f"normalize: {row[ID]} not removed: {exc}\n")
        else:
            env.stdout.write(f"removed task {row[ID]}\n")
    removed = len(chosen) - failed
    env.stdout.write(f"{removed} {status.replace('_', ' ')} task{'' if removed == 1 else 's'} "
                     "removed\n")
    return int(ExitStatus.FAILED) if failed else 0


def clean_copies(env: Environment, *, dry_run: bool) -> int:
    """`tasks clean`: remove the copies no task needs, one line each; the kept ones named."""
    from normalize.store import TaskStore
    from normalize.subtasks.copies import sweep

    swept = sweep(TaskStore(), dry_run=dry_run)
    for item in swept:
        verb = ("would remove" if dry_run else "removed") if item.removed else "kept"
        env.stdout.write(f"{verb} copies/{item.task_id}: {item.why}\n")
    gone = sum(item.removed for item in swept)
    env.stdout.write(f"{gone} cop{'y' if gone == 1 else 'ies'} "
                     f"{'to remove' if dry_run else 'removed'}, {len(swept) - gone} kept\n")
    return 0
