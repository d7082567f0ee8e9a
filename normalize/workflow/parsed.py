"""Workflow texts' parsed data kept between runs (start-up: importing `tomllib` costs ~11 ms).

The data of a text that `tomllib` parsed and the value checks passed is kept in
the data home (`cache/workflows.json`, owner-only, beside the sandbox tier's
verdict), keyed on the whole text: the same text is the same data, so a run of a
workflow parsed before decodes JSON (in C) and never imports `tomllib`. Data
holding TOML dates or times (they have no JSON form) is not kept, nor a text
over `BIGGEST` characters; the `MOST` latest texts are. A file that is not the
user's own, or is writable by others, is not read.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

NAME = "workflows.json"
MOST = 16
BIGGEST = 256 * 1024
PARSER = f"tomllib {sys.version_info[0]}.{sys.version_info[1]}"  # what made the data

_read: dict[Path, dict[str, str]] = {}  # per file: text → its data as JSON


def _where() -> Path | None:
    from normalize.homes import data_home

    try:
        return data_home() / "cache" / NAME
    except Exception:  # (a bad NORMALIZE_HOME: the command itself says so)
        return None


def _texts(path: Path) -> dict[str, str]:
    kept = _read.get(path)
    if kept is None:
        kept = _read[path] = _load(path)
    return kept


def _load(path: Path) -> dict[str, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as fh:
        status = os.fstat(fd)
        if status.st_uid != os.getuid() or status.st_mode & 0o022:
            return {}
        try:
            kept = json.loads(fh.read())
        except (OSError, ValueError):
            return {}
    if not isinstance(kept, dict) or kept.get("parser") != PARSER or \
            not isinstance(kept.get("texts"), list):
        return {}
    return {text: data for text, data in (entry for entry in kept["texts"]
                                          if isinstance(entry, list) and len(entry) == 2)
            if isinstance(text, str) and isinstance(data, str)}


def lookup(source: str) -> dict[str, Any] | None:
    """The data kept for this exact text (a fresh copy), or None."""
    path = _where()
    if path is None or len(source) > BIGGEST:
        return None
    data = _texts(path).get(source)
    if data is None:
        return None
    found = json.loads(data)
    return found if isinstance(found, dict) else None


def keep(source: str, data: dict[str, Any]) -> None:
    """Keep `data` as the parse of `source`, in an existing data home; best effort."""
    path = _where()
    if path is None or len(source) > BIGGEST or not path.parent.parent.is_dir():
        return
    try:
        encoded = json.dumps(data)
    except (TypeError, ValueError):  # a date or a time: no JSON form
        return
    from normalize.fsutil import atomic_write, private_dirs

    texts = dict(_texts(path))
    texts.pop(source, None)
    texts[source] = encoded
    texts = dict(list(texts.items())[-MOST:])
    with contextlib.suppress(OSError):
        private_dirs(path.parent)
        atomic_write(path, json.dumps({"parser": PARSER, "texts": [list(item) for item in
                                                                   texts.items()]}).encode(),
                     fsync=False, mode=0o600)
        _read[path] = texts
