"""Cells of the `normalize tasks` table (kept apart: a listing loads nothing else)."""

from __future__ import annotations

import os


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, with `…` where it was cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def short_path(path: str, width: int) -> str:
    """A directory as a person knows it: `~/…` for the home, cut from the left to `width`."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home):]
    return path if len(path) <= width else "…" + path[-(width - 1):]
