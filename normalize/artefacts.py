"""The one door out: every artefact normalize writes for someone else is redacted here.

An artefact is a file or a text that leaves the owner-only data home for
other eyes: what a batch uploads to its store (the manifest, item progress,
task files, journals, diffs), `batch collect`'s `results.jsonl`,
`results.csv` and diffs, the HTML report, a commit's message and its
branch's name, the GitHub Action's outputs, job summary, `events.jsonl` and
log. Each goes through one function below, which redacts (the workspace's
`Redactor` when the caller has one, else the shape-only default) and writes;
the exact data stays in the task store, which resume executes (rule 11).

How each kind is redacted:

- JSON (`.json`) is decoded and redacted as data (`Redactor.redact_obj`: a
  string under a secret-looking key such as `db_password` goes whole), JSON
  lines (`.jsonl`, `.ckpt`) line by line; a file that does not parse is
  redacted as text;
- CSV cells are redacted, and a cell a spreadsheet would read as a formula
  (starting with `=`, `+`, `-`, `@`, a tab or a carriage return, as OWASP's
  CSV-injection advice lists, or a full-width `＝＋－＠`) gets a leading `'`; a
  plain number is left alone;
- a branch name that would change when redacted is refused (a name cannot
  hold `[REDACTED]`, and a secret in it would be pushed).

`tests/spine/test_artefact_door.py` finds the writers of artefacts by the AST
and fails when one writes around this module.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from normalize import fsopen
from normalize.errors import UsageError
from normalize.redact import Redactor, default_redactor

__all__ = [
    "FORMULA_STARTS",
    "LineWriter",
    "append_text",
    "branch_name",
    "csv_text",
    "neutral_cell",
    "redacted_values",
    "shown_bytes",
    "upload",
    "write_csv",
    "write_jsonl",
    "write_text",
]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""What makes a spreadsheet read a cell as a formula (OWASP, CSV injection; the full-width
forms too, which some spreadsheets fold to the ASCII ones)."""
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_LINES = (".jsonl", ".ckpt")


class Writable(Protocol):
    """What `upload` writes through: an fsspec file system's whole-file write."""

    def pipe_file(self, path: str, value: bytes) -> Any: ...


def _redactor(redactor: Redactor | None) -> Redactor:
    return redactor or default_redactor()


def shown_bytes(name: str, data: bytes, redactor: Redactor | None = None) -> bytes:
    """`data`, the content of a file called `name`, redacted as its kind says."""
    shown = _redactor(redactor)
    text = data.decode("utf-8", errors="surrogateescape")
    if name.endswith(".json"):
        return _json(text, shown).encode("utf-8", errors="surrogateescape")
    if name.endswith(_LINES):
        lines = text.split("\n")
        return "\n".join(_json(line, shown) if line.strip() else line
                         for line in lines).encode("utf-8", errors="surrogateescape")
    return shown.redact(text).encode("utf-8", errors="surrogateescape")


def _json(text: str, shown: Redactor) -> str:
    """A JSON text redacted as data: as it was when nothing changed (its own spacing and
    order), else dumped again (the keys in their order)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return shown.redact(text)
    redacted = shown.redact_obj(data)
    return text if redacted == data else json.dumps(redacted)


def upload(fs: Writable, path: str, rel: str, data: bytes,
           redactor: Redactor | None = None) -> None:
    """Write `data` (the data home's file `rel`) whole to `path` on `fs`, redacted."""
    fs.pipe_file(path, shown_bytes(rel, data, redactor))


def write_text(path: Path, text: str, redactor: Redactor | None = None) -> None:
    """Write `text` redacted to `path` (its directory exists), never through a symlink."""
    _place(path, shown_bytes(path.name, text.encode("utf-8", errors="surrogateescape"),
                             redactor))


def write_jsonl(path: Path, records: Iterable[Any], redactor: Redactor | None = None) -> None:
    """One JSON record a line, each redacted as data."""
    shown = _redactor(redactor)
    _place(path, "".join(json.dumps(shown.redact_obj(record), sort_keys=True) + "\n"
                         for record in records).encode())


def neutral_cell(cell: str) -> str:
    """A cell no spreadsheet runs: a leading `'` before a formula's first character."""
    if cell.startswith(FORMULA_STARTS) and _NUMBER.fullmatch(cell) is None:
        return "'" + cell
    return cell


def csv_text(header: list[str], rows: Iterable[list[str]],
             redactor: Redactor | None = None) -> str:
    """The table as CSV: every cell redacted and neutral."""
    shown = _redactor(redactor)
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    for row in (header, *rows):
        writer.writerow([neutral_cell(shown.redact(cell)) for cell in row])
    return out.getvalue()


def write_csv(path: Path, header: list[str], rows: Iterable[list[str]],
              redactor: Redactor | None = None) -> None:
    """Write the table as CSV (`csv_text`), never through a symlink."""
    _place(path, csv_text(header, rows, redactor).encode())


def branch_name(name: str, redactor: Redactor | None = None) -> str:
    """`name` when it holds no secret; a `UsageError` otherwise (it would be pushed)."""
    if _redactor(redactor).redact(name) != name:
        raise UsageError("the branch name holds what looks like a secret; choose another "
                         "with --branch")
    return name


def append_text(path: Path, text: str, redactor: Redactor | None = None) -> None:
    """Append `text` redacted to `path` (a file others read: the Action's outputs, summary)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(_redactor(redactor).redact(text))


def redacted_values(values: Mapping[str, str], redactor: Redactor | None = None
                    ) -> dict[str, str]:
    """Each value of `values` redacted (a name under a secret-looking key goes whole)."""
    return _redactor(redactor).redact_obj(dict(values))


class LineWriter:
    """An artefact written line by line as it is made (a run's events, its log), each line
    redacted as the file's kind says: what was written so far survives a killed job."""

    def __init__(self, path: Path, *, append: bool = False,
                 redactor: Redactor | None = None) -> None:
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (
            os.O_APPEND if append else os.O_TRUNC)
        self.name = path.name
        self.redactor = redactor
        self._handle = os.fdopen(os.open(path, flags, 0o644), "wb")

    def write(self, line: bytes) -> None:
        body = line.rstrip(b"\r\n")
        self._handle.write(shown_bytes(self.name, body, self.redactor) + line[len(body):])
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _place(path: Path, data: bytes) -> None:
    try:
        fsopen.place(path.parent, path.name, data, mode=0o644, replace_link=False)
    except fsopen.LinkRefusedError:
        raise UsageError(f"{path}: refusing to write through a symlink") from None
