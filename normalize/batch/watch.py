"""Where a batch stands (`batch status`) and what it made (`batch collect`), read from the store.

Nothing here needs the batch's parent to run: the manifest, each item's
progress and each item's task say it all, so a batch is watched from any
machine that reaches its store.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from normalize.batch.manifest import BatchFiles, Manifest, Progress, item_status
from normalize.batch.publish import patch_of, published_diff
from normalize.errors import NormalizeError
from normalize.store import TaskStore
from normalize.task import Task


@dataclass
class ItemRow:
    """One line of `batch status`."""

    position: int
    task_id: str
    status: str
    attempts: int
    node: str
    turns: int = 0
    cost_usd: float = 0.0
    added: int = 0
    removed: int = 0
    question: str = ""
    note: str = ""


def rows(store: TaskStore, manifest: Manifest, *, changes: bool = True) -> list[ItemRow]:
    """A row per item, in order."""
    files = BatchFiles(store.home, manifest.batch)
    out = []
    for position in range(len(manifest.items)):
        progress = files.progress(position)
        row = ItemRow(position, progress.task_id, item_status(store, progress),
                      progress.attempts, _node(store, progress), note=progress.note)
        task = _task(store, progress)
        if task is not None:
            row.turns, row.cost_usd = task.turn, task.usage.cost_usd
            row.question = task.pending.question if task.pending is not None else ""
            if changes:
                row.added, row.removed = _lines(store, task)
        out.append(row)
    return out


def _node(store: TaskStore, progress: Progress) -> str:
    """Where the item runs or ran: what its worker wrote last, else what its parent saw."""
    try:
        return (store.tasks_dir / progress.task_id / "node").read_text().strip()[:64]
    except OSError:
        return progress.node


def _task(store: TaskStore, progress: Progress) -> Task | None:
    if progress.stage == "untouched":
        return None
    try:
        return store.load(progress.task_id, with_config=False)
    except NormalizeError:
        return None


def _lines(store: TaskStore, task: Task) -> tuple[int, int]:
    """The task's net lines added and removed (0, 0 without checkpoints)."""
    from normalize.checkpoints.changes import TaskChanges

    try:
        counts = TaskChanges.open(store, task).numstat(None)
    except NormalizeError:
        return 0, 0
    return (sum(max(a, 0) for a, _ in counts.values()),
            sum(max(r, 0) for _, r in counts.values()))


def collect(store: TaskStore, manifest: Manifest, out: Path) -> int:
    """Write each item's diff (`NNNNN-ID.diff`), and the items in one `results.jsonl` and one
    `results.csv`; the items written. Each file is an artefact (`normalize.artefacts`):
    redacted, with each item's workspace's redactor, and the CSV's formulas made inert."""
    from normalize import artefacts
    from normalize.redact import Redactor, default_redactor

    out.mkdir(parents=True, exist_ok=True)
    files = BatchFiles(store.home, manifest.batch)
    records = []
    for row in rows(store, manifest):  # counted as `batch status` counts them
        progress = files.progress(row.position)
        task = _task(store, progress)
        record: dict[str, Any] = {**asdict(row), "item": manifest.items[row.position]}
        redactor = default_redactor()
        if task is not None:
            redactor = Redactor.for_workspace(task.workspace)
            # (a store pulled from a URL has no checkpoints: the diff its parent published)
            patch = patch_of(store, task) or \
                published_diff(store.home, manifest.batch, task.id) or ""
            if patch:
                name = f"{row.position:05d}-{row.task_id}.diff"
                artefacts.write_text(out / name, patch, redactor)
                record["diff"] = name
            record.update(summary=task.summary, error=task.error,
                          result=task.result, workspace=task.workspace)
        records.append(redactor.redact_obj(record))  # each with its own workspace's redactor
    artefacts.write_jsonl(out / "results.jsonl", records)
    header, table = csv_table(records)
    artefacts.write_csv(out / "results.csv", header, table)
    return len(records)


def csv_table(records: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The records as CSV: a column per field, `item.NAME` per item field and `result.NAME`
    per field of a structured result (one `result` column for a result that is not a table);
    a value that is not text or a number is its JSON."""
    flat = [_flat(record) for record in records]
    header: dict[str, None] = {}  # (ordered, without repeats)
    for row in flat:
        header.update(dict.fromkeys(row))
    return list(header), [[row.get(name, "") for name in header] for row in flat]


def _flat(record: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in record.items():
        if name in ("item", "result") and isinstance(value, dict):
            out.update({f"{name}.{key}": _cell(inner) for key, inner in value.items()})
        else:
            out[name] = _cell(value)
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)
