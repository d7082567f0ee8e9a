"""Walking a workspace the way git sees it: `.gitignore` respected, binaries skipped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".ruff_cache",
                            ".pytest_cache", ".tox", ".venv", "venv", ".nox"})
BINARY_SNIFF = 8192

LANGUAGES = {
    ".py": "Python", ".pyi": "Python", ".js": "JavaScript", ".mjs": "JavaScript",
    ".cjs": "JavaScript", ".jsx": "JavaScript", ".ts": "TypeScript", ".tsx": "TypeScript",
    ".go": "Go", ".rs": "Rust", ".java": "Java", ".c": "C", ".h": "C", ".cc": "C++",
    ".cpp": "C++", ".cxx": "C++", ".hpp": "C++", ".hh": "C++", ".rb": "Ruby", ".sh": "Shell",
    ".bash": "Shell", ".md": "Markdown", ".rst": "reStructuredText", ".toml": "TOML",
    ".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".html": "HTML", ".css": "CSS",
    ".sql": "SQL", ".kt": "Kotlin", ".swift": "Swift", ".php": "PHP", ".cs": "C#",
    ".scala": "Scala", ".lua": "Lua", ".txt": "Text",
}


def language_of(path: Path | str) -> str | None:
    """The language name for a file extension, or None."""
    return LANGUAGES.get(os.path.splitext(str(path))[1].lower())


def is_binary(path: Path) -> bool:
    """True when the file's first bytes hold a NUL (git's heuristic).

    A file that cannot be read is not called binary: reading it says why.
    """
    try:
        with path.open("rb") as fh:
            return b"\x00" in fh.read(BINARY_SNIFF)
    except OSError:
        return False


@lru_cache(maxsize=512)
def _spec_for(gitignore: str, mtime: float) -> pathspec.GitIgnoreSpec:
    del mtime  # part of the cache key only
    import pathspec  # here: a search on ripgrep never parses a .gitignore itself

    with open(gitignore, encoding="utf-8", errors="replace") as fh:
        return pathspec.GitIgnoreSpec.from_lines(fh)


class IgnoreRules:
    """The `.gitignore` files from the workspace root down to a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []

    def enter(self, directory: Path) -> IgnoreRules:
        """Rules for `directory`: these plus its own `.gitignore`, if any."""
        child = IgnoreRules(self.root)
        child._specs = self._specs
        gitignore = directory / ".gitignore"
        try:
            mtime = gitignore.stat().st_mtime
        except OSError:
            return child
        child._specs = [*self._specs, (directory, _spec_for(str(gitignore), mtime))]
        return child

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in self._specs:
            rel = path.relative_to(base).as_posix()
            if is_dir:
                rel += "/"
            if spec.match_file(rel):
                return True
        return False


def walk(root: Path, start: Path | None = None, *, include_hidden: bool = True) -> Iterator[Path]:
    """Every file under `start` (default `root`) not ignored by git, in sorted order."""
    start = start or root
    rules = IgnoreRules(root)
    # Pick up the .gitignore files of the directories between root and start.
    for parent in reversed(start.relative_to(root).parents):
        rules = rules.enter(root / parent)
    if start.is_file():
        yield start
        return
    yield from _walk_dir(start, rules, include_hidden)


def _walk_dir(directory: Path, rules: IgnoreRules, include_hidden: bool) -> Iterator[Path]:
    rules = rules.enter(directory)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name in ALWAYS_SKIPPED or (not include_hidden and entry.name.startswith(".")):
            continue
        path = Path(entry.path)
        is_dir = entry.is_dir(follow_symlinks=False)
        if rules.ignored(path, is_dir):
            continue
        if is_dir:
            if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                continue  # a virtual environment, whatever its name
            yield from _walk_dir(path, rules, include_hidden)
        elif entry.is_file(follow_symlinks=False):
            yield path
