"""The repo map the agent's cached prefix holds: rebuilt only when the source files change.

A change check is cheap: one walk of the workspace (`.gitignore` respected)
and a digest of each source file's (path, size, mtime). The map is rebuilt
only when that digest moves, at most once per call, and kept on disk by
(workspace, budget), so a resumed task or a new one in an unchanged tree
reads it instead of parsing every file again. A new map is redacted before
it is kept or shown, as results are. The map shows signatures
without line ranges: an edit that only moves code leaves its text, and so
the cached prefix, as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from normalize.fsutil import atomic_write, private_dirs
from normalize.redact import redact as shape_redact  # without a redactor: shapes only
from normalize.tools.code.grammars import language_for
from normalize.tools.code.repomap import build_map
from normalize.tools.files import walk

FORMAT = 1
"""Bumped when the map's text for the same files would change: older files are not read."""


@dataclass
class Counts:
    """How the map was got each time it was asked for (the tests and the benchmark read it)."""

    built: int = 0
    from_disk: int = 0
    unchanged: int = 0


class CachedRepoMap:
    """`text()` is the repo map of `root` in `tokens` tokens, rebuilt only when files change."""

    def __init__(self, root: Path, tokens: int, cache_dir: Path | None = None, *,
                 redact: Callable[[str], str] | None = None) -> None:
        self.root = root.resolve()
        self.tokens = tokens
        self.redact = redact or shape_redact
        """Applied to a new map before it is kept or shown (a constant's value may be a key)."""
        key = hashlib.sha256(f"{FORMAT}\0{self.root}\0{tokens}".encode()).hexdigest()[:24]
        self.path = None if cache_dir is None else cache_dir / f"{key}.json"
        self.counts = Counts()
        self._signature = ""
        self._text = ""

    def sources(self) -> tuple[str, list[Path]]:
        """The source files the map reads, and the digest of their paths, sizes and times."""
        digest = hashlib.sha256()
        found: list[Path] = []
        for path in walk(self.root):
            if language_for(path) is None:
                continue
            try:
                info = path.stat()
            except OSError:
                continue
            found.append(path)
            digest.update(f"{path.relative_to(self.root)}\0{info.st_size}\0"
                          f"{info.st_mtime_ns}\n".encode())
        return digest.hexdigest(), found

    def text(self) -> str:
        """The map for the tree as it is now (the same string while no source file changed)."""
        signature, paths = self.sources()
        if signature == self._signature:
            self.counts.unchanged += 1
            return self._text
        stored = self._load(signature)
        if stored is not None:
            self.counts.from_disk += 1
        else:
            stored = build_map(self.root, paths, tokens=self.tokens, lines=False).text
            stored = self.redact(stored)
            self.counts.built += 1
            self._save(signature, stored)
        self._signature, self._text = signature, stored
        return stored

    def _load(self, signature: str) -> str | None:
        if self.path is None:
            return None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("signature") != signature:
            return None
        text = data.get("text")
        return text if isinstance(text, str) else None

    def _save(self, signature: str, text: str) -> None:
        if self.path is None:
            return
        record = {"format": FORMAT, "workspace": str(self.root), "tokens": self.tokens,
                  "signature": signature, "text": text}
        try:
            private_dirs(self.path.parent)
            atomic_write(self.path, json.dumps(record).encode(), fsync=False, mode=0o600)
        except OSError:
            pass  # a cache that cannot be written is rebuilt next time, nothing worse


__all__ = ["CachedRepoMap", "Counts"]
