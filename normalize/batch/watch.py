"""Where a batch stands (`batch status`) and what it made (`batch collect`), read from the store.

Nothing here needs the batch's parent to run: the manifest, each item's
progress and each item's task say it all, so a batch is watched from any
machine that reaches its store.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from normalize.batch.index import IndexEntry, ItemIndex
from normalize.batch.manifest import BatchFiles, Manifest, Progress, item_status
from normalize.batch.publish import patch_of, published_diff
from normalize.errors import NormalizeError
from normalize.redact import Redactor
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


def rows(store: TaskStore, manifest: Manifest, *, changes: bool = True,
         index: dict[int, IndexEntry] | None = None) -> list[ItemRow]:
    """A row per item, in order: from the batch's index where it covers the item (one file
    read for all of them), else from the item's own files."""
    files = BatchFiles(store.home, manifest.batch)
    if index is None:
        index = ItemIndex(store, manifest.batch).read()
    out = []
    for position, progress in enumerate(files.all_progress(
            len(manifest.items), {n: e.progress() for n, e in index.items()})):
        entry = index.get(position)
        if entry is not None:
            out.append(ItemRow(position, entry.task_id, entry.status, entry.attempts,
                               entry.node, entry.turns, entry.cost_usd, entry.added,
                               entry.removed, entry.question, entry.note))
            continue
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

    out.mkdir(parents=True, exist_ok=True)
    kept = ItemIndex(store, manifest.batch)
    index = kept.read()
    records = [_record(store, manifest, row, kept, index.get(row.position), out)
               for row in rows(store, manifest, index=index)]  # counted as status counts
    artefacts.write_jsonl(out / "results.jsonl", records)
    header, table = csv_table(records)
    artefacts.write_csv(out / "results.csv", header, table)
    return len(records)


def _record(store: TaskStore, manifest: Manifest, row: ItemRow, kept: ItemIndex,
            entry: IndexEntry | None, out: Path) -> dict[str, Any]:
    """One item's line of the results (its diff written beside), redacted with its own
    workspace's redactor: from the index's entry, else from its task."""
    from normalize.redact import default_redactor

    record: dict[str, Any] = {**asdict(row), "item": manifest.items[row.position]}
    task = None
    if entry is None:
        task = _task(store, BatchFiles(store.home, manifest.batch).progress(row.position))
    if entry is not None and entry.has_task:
        patch = kept.diff(entry.task_id)
        done = {"summary": entry.summary, "error": entry.error, "result": entry.result,
                "workspace": entry.workspace}
    elif task is not None:
        # (a store pulled from a URL has no checkpoints: the diff its parent published)
        patch = patch_of(store, task) or \
            published_diff(store.home, manifest.batch, task.id) or ""
        done = {"summary": task.summary, "error": task.error, "result": task.result,
                "workspace": task.workspace}
    else:
        return default_redactor().redact_obj(record)
    redactor = _redactor(done["workspace"])
    _diff_file(out, row, patch, redactor, record)
    record.update(done)
    return redactor.redact_obj(record)


def _diff_file(out: Path, row: ItemRow, patch: str, redactor: Redactor,
               record: dict[str, Any]) -> None:
    """Write the item's diff (if it has one) as an artefact, named in its record."""
    from normalize import artefacts

    if patch:
        name = f"{row.position:05d}-{row.task_id}.diff"
        artefacts.write_text(out / name, patch, redactor)
        record["diff"] = name


@functools.lru_cache(maxsize=256)
def _redactor(workspace: str) -> Redactor:
    """A workspace's redactor (its `.env*` values too), found once per workspace."""
    return Redactor.for_workspace(workspace)


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
