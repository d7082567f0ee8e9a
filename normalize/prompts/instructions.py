"""Project instructions: AGENTS.md (else CLAUDE.md) at the workspace root, a user-wide one too.

Both go into the stable prefix of every request (the system prompt), the
user-wide file (`AGENTS.md` in normalize's config directory) first, each
bounded in size with a notice when cut. A nested `AGENTS.md` (in a directory
below the workspace root) applies once the task works below its directory:
the first time an action's result names a path under it, its text is given
to the model once, as a later message (`nested_for`), so the cached prefix
never changes mid-task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

NAMES = ("AGENTS.md", "CLAUDE.md")
"""The file names read at the workspace root, the first found wins."""
NESTED_NAME = "AGENTS.md"
MAX_CHARS = 12_000
"""The most of one instructions file that goes into the prompt."""
MAX_NESTED_CHARS = 1_000
"""The most of a nested file given as a later message (the rest: `view` it)."""
MAX_READ = 1_000_000


@dataclass(frozen=True)
class Instructions:
    """The instructions text for the stable prefix, where it came from, and what was cut."""

    text: str = ""
    sources: tuple[str, ...] = ()
    notices: tuple[str, ...] = field(default=())


def _read(path: Path) -> str | None:
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            data = fh.read(MAX_READ)
    except OSError:
        return None
    return data.decode("utf-8", "replace").strip() or None


def _bounded(text: str, shown: str, limit: int) -> tuple[str, str | None]:
    """`text` cut to `limit` characters at a line end, and the notice saying so."""
    if len(text) <= limit:
        return text, None
    cut = text[:limit]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    notice = (f"{shown} is {len(text):,} characters; only the first {len(cut):,} are "
              f"included (view {shown} for the rest)")
    return f"{cut}\n… (cut: {notice})", notice


def project_instructions(workspace: Path, user_dir: Path | None = None, *,
                         limit: int = MAX_CHARS) -> Instructions:
    """The user-wide and the workspace's instructions, each at most `limit` characters."""
    parts: list[str] = []
    sources: list[str] = []
    notices: list[str] = []
    found: list[tuple[Path, str]] = []
    if user_dir is not None:
        found.append((user_dir / NESTED_NAME, f"{NESTED_NAME} (yours, in {user_dir})"))
    for name in NAMES:
        if (workspace / name).is_file():
            found.append((workspace / name, name))
            break
    for path, shown in found:
        text = _read(path)
        if text is None:
            continue
        body, notice = _bounded(text, path.name if path.parent == workspace else str(path),
                                limit)
        parts.append(f"### From {shown}\n{body}")
        sources.append(str(path))
        if notice:
            notices.append(notice)
    if not parts:
        return Instructions()
    text = ("## Project instructions\nFollow these instructions from the project and the "
            "user; the task and these rules come before your habits.\n\n" + "\n\n".join(parts))
    return Instructions(text, tuple(sources), tuple(notices))


def nested_for(workspace: Path, path: str, seen: set[str]) -> list[tuple[str, str]]:
    """(relative path, message) for each nested AGENTS.md not in `seen` that covers `path`.

    `path` is relative to the workspace; the root's own file is in the prefix
    already. The files found are added to `seen`.
    """
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts:
        return []
    out: list[tuple[str, str]] = []
    parents = list(reversed(rel.parents))[1:]  # below the root, outermost first
    if (workspace / rel).is_dir():
        parents.append(rel)
    for directory in parents:
        shown = f"{directory.as_posix()}/{NESTED_NAME}"
        if shown in seen:
            continue
        text = _read(workspace / directory / NESTED_NAME)
        if text is None:
            continue
        seen.add(shown)
        body, _ = _bounded(text, shown, MAX_NESTED_CHARS)
        out.append((shown, f"Instructions for {directory.as_posix()}/ (from {shown}), which "
                           f"apply to everything below it:\n{body}"))
    return out


__all__ = ["MAX_CHARS", "NAMES", "Instructions", "nested_for", "project_instructions"]
