"""A batch's items: JSON lines, CSV with a header, or plain lines, from a file or stdin.

Each item is a table of fields; a workflow reaches them as `{item.NAME}`.
A plain line is the one field `line`. The format is the one named, else the
file's suffix (`.csv`, `.jsonl`), else JSON lines when the first line opens an
object, else plain lines. A bad item is one line naming the file and line.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from normalize.errors import UsageError

FORMATS = ("jsonl", "csv", "lines")
Item = dict[str, Any]


def read_items(source: str, text: str | None = None, fmt: str | None = None) -> list[Item]:
    """The items of `source` (a path, or `-` with `text` read from stdin)."""
    if text is None:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UsageError(f"--items {source}: {why or exc}") from None
    shown = "stdin" if source == "-" else source
    fmt = fmt or _guess(source, text)
    if fmt not in FORMATS:
        raise UsageError(f"--items-format {fmt}: unknown (choose from {', '.join(FORMATS)})")
    items = {"jsonl": _jsonl, "csv": _csv, "lines": _lines}[fmt](text, shown)
    if not items:
        raise UsageError(f"--items {shown}: no items in it")
    return items


def _guess(source: str, text: str) -> str:
    suffix = Path(source).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "jsonl" if first.lstrip().startswith("{") else "lines"


def _jsonl(text: str, shown: str) -> list[Item]:
    items: list[Item] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{shown}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise UsageError(f"{shown}:{number}: an item must be a JSON object "
                             f"(got {type(value).__name__})")
        items.append(value)
    return items


def _csv(text: str, shown: str) -> list[Item]:
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, row) for row in reader]
    rows = [(n, row) for n, row in rows if any(cell.strip() for cell in row)]
    if not rows:
        return []
    header = [name.strip() for name in rows[0][1]]
    if any(not name for name in header) or len(set(header)) != len(header):
        raise UsageError(f"{shown}:{rows[0][0]}: the CSV header needs distinct, non-empty "
                         "column names")
    items: list[Item] = []
    for number, row in rows[1:]:
        if len(row) != len(header):
            raise UsageError(f"{shown}:{number}: {len(row)} column(s) where the header has "
                             f"{len(header)}")
        items.append(dict(zip(header, row, strict=True)))
    return items


def _lines(text: str, shown: str) -> list[Item]:  # noqa: ARG001 (one signature for all)
    return [{"line": line.strip()} for line in text.splitlines() if line.strip()]
