"""What a task's journal still says when its task file is damaged or was moved aside.

The journal is written beside the task file and survives it; a task read
back from it carries the goal, driver, workspace and workflow its runs
started with and the status, summary, error and figures its last run ended
with. It is for showing (`tasks`, `tasks show`, `report`), never for
resuming: what resume executes is only ever the stored task.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.statuses import TaskStatus
from normalize.store import index

if TYPE_CHECKING:  # a task is made only from a damaged one's journal, not to list
    from normalize.task import Task

ASIDE = ".json.corrupt-"


def aside_of(tasks_dir: Path, task_id: str) -> Path | None:
    """The newest copy of the task's damaged file that was moved aside, if any."""
    try:
        found = sorted(tasks_dir.glob(f"{task_id}{ASIDE}*"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return None
    return found[-1] if found else None


def aside_ids(tasks_dir: Path) -> list[str]:
    """The ids of tasks whose file was moved aside and not replaced, with a journal kept."""
    try:  # (a plain scan: a glob matched every name of a big store against a pattern)
        with os.scandir(tasks_dir) as scan:
            names = {entry.name.split(ASIDE)[0] for entry in scan if ASIDE in entry.name}
    except OSError:
        return []
    return sorted(n for n in names if not (tasks_dir / f"{n}.json").exists()
                  and (tasks_dir / f"{n}.jsonl").is_file())


def moved_aside(tasks_dir: Path) -> Iterator[tuple[str, Path, str]]:
    """(id, moved-aside file, what the listing says) for each task only a journal still finds."""
    for task_id in aside_ids(tasks_dir):
        aside = aside_of(tasks_dir, task_id) or tasks_dir / f"{task_id}.json"
        yield task_id, aside, (f"task {task_id}: its file was damaged and moved aside to "
                               f"{aside}; `normalize tasks show {task_id}` shows what its "
                               "journal holds")


def rows(task_ids: list[str], salvage: Callable[[str], Task | None]) -> list[index.Row]:
    """Listing rows (status `damaged`) for these tasks, as their journals tell them."""
    found: list[index.Row] = []
    for task_id in task_ids:
        task = salvage(task_id)
        if task is not None:
            summary = {**index.summary_of(task.to_dict()), "status": "damaged"}
            found.append([summary[name] for name in index.FIELDS])
    return found


def from_journal(task_id: str, events: Iterable[dict[str, Any]]) -> Task | None:
    """The task as its journal tells it (None when the journal never started a run)."""
    from normalize.task import Task

    task: Task | None = None
    for event in events:
        kind = event.get("type")
        if kind == "run_started" and task is None:
            task = Task(id=task_id, goal=str(event.get("goal", "")),
                        workspace=str(event.get("workspace", "")),
                        driver=str(event.get("driver", "")),
                        workflow=event.get("workflow") or None,
                        created_at=float(event.get("ts", 0.0)))
        if task is None:
            continue
        if kind == "run_started":
            task.status = TaskStatus.INTERRUPTED  # until its run_ended says otherwise
        elif kind == "run_ended":
            _ended(task, event)
        task.updated_at = float(event.get("ts", task.updated_at))
    return task


def _ended(task: Task, event: dict[str, Any]) -> None:
    """What a `run_ended` event says of the task."""
    try:
        task.status = TaskStatus(str(event.get("status")))
    except ValueError:
        task.status = TaskStatus.FAILED
    task.summary = str(event.get("summary") or "")
    task.error = event.get("error")
    task.turn = int(event.get("turns") or task.turn)
    task.actions_run = int(event.get("actions") or task.actions_run)
    task.elapsed += float(event.get("duration") or 0.0)
    from normalize.task import Usage

    task.usage = Usage(input_tokens=int(event.get("input_tokens") or 0),
                       output_tokens=int(event.get("output_tokens") or 0),
                       cost_usd=float(event.get("cost_usd") or 0.0))
