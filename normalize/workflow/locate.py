"""Where a key sits in a TOML source: line and column for error messages.

tomlkit parses but does not keep positions, so this scans the text once and
records, for every `key = value` line and every table header, the table path
it belongs to (`workflow.steps.2.action`, array-of-tables counted from 0).
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_PART = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^(\s*)({_PART}(?:\s*\.\s*{_PART})*)\s*=")


_BARE = re.compile(r"[A-Za-z0-9_-]+")
_PARTS = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _split_key(text: str) -> list[str]:
    if _BARE.fullmatch(text):  # the usual case: one bare key
        return [text]
    return [p.strip("\"'") for p in _PARTS.findall(text)]


class Locator:
    """Maps dotted key paths to (line, column), both 1-based."""

    def __init__(self, source: str) -> None:
        self.positions: dict[str, tuple[int, int]] = {}
        counts: dict[str, int] = {}
        table: list[str] = []
        in_multiline: str | None = None
        for number, line in enumerate(source.splitlines(), 1):
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _HEADER.match(line) if line.lstrip().startswith("[") else None
            if header:
                names = _split_key(header.group(2))
                col = line.index(header.group(1)) + 1
                if header.group(1) == "[[":
                    parent = self._resolve(names, counts, last=False)
                    index = counts.get(parent, 0)
                    counts[parent] = index + 1
                    table = [*parent.split("."), str(index)] if parent else [str(index)]
                else:
                    table = self._resolve(names, counts).split(".")
                self.positions.setdefault(".".join(table), (number, col))
                continue
            key = _KEY.match(line)
            if key:
                path = ".".join([*table, *_split_key(key.group(2))])
                self.positions.setdefault(path, (number, len(key.group(1)) + 1))
                rest = line[key.end():]
                if '"""' in rest or "'''" in rest:
                    for quote in ('"""', "'''"):
                        if rest.count(quote) == 1:
                            in_multiline = quote

    def _resolve(self, names: list[str], counts: dict[str, int], *, last: bool = True) -> str:
        """A header path with the current index of each array-of-tables inserted."""
        out: list[str] = []
        for i, name in enumerate(names):
            out.append(name)
            joined = ".".join(out)
            if joined in counts and (last or i < len(names) - 1):
                out.append(str(counts[joined] - 1))
        return ".".join(out)

    def find(self, path: str) -> tuple[int, int] | None:
        """The position of `path` (an array of tables: its first table), or of its nearest
        ancestor that has one."""
        first = self.positions.get(f"{path}.0")
        if path not in self.positions and first is not None:
            return first
        parts = path.split(".")
        while parts:
            pos = self.positions.get(".".join(parts))
            if pos is not None:
                return pos
            parts.pop()
        return None
