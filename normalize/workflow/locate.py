"""Where a key sits in a TOML source: line and column for error messages.

tomlkit parses but does not keep positions, so this scans the text once and
records, for every `key = value` line and every table header, the table path
it belongs to (`workflow.steps.2.action`, array-of-tables counted from 0).
A valid file asks only for its tables' lines (a step's `line`), so the scan
starts with the header lines alone (found by one regex over the text) and
reads every line only when a key is asked for (an error's position).
"""

from __future__ import annotations

import functools
import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_PART = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^(\s*)({_PART}(?:\s*\.\s*{_PART})*)\s*=")


_HEADER_LINES = re.compile(r"^[ \t]*\[.*$", re.MULTILINE)
# lines the header-only scan cannot number or skip as `splitlines()` does
_UNSAFE = re.compile("\"\"\"|\'\'\'|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_PARTS = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _split_key(text: str) -> list[str]:
    if _BARE.fullmatch(text):  # the usual case: one bare key
        return [text]
    return [p.strip("\"'") for p in _PARTS.findall(text)]


@functools.lru_cache(maxsize=256)
def _parse_header(line: str) -> tuple[list[str], int, bool] | None:
    """A header line's key parts, column and whether it opens an array of tables."""
    header = _HEADER.match(line)
    if not header:
        return None
    return _split_key(header.group(2)), line.index(header.group(1)) + 1, header.group(1) == "[["


class Locator:
    """Maps dotted key paths to (line, column), both 1-based."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._full: dict[str, tuple[int, int]] | None = None
        self.headers: dict[str, tuple[int, int]] | None = None
        if _UNSAFE.search(source) is None:
            self.headers = self._scan_headers(source)

    @property
    def positions(self) -> dict[str, tuple[int, int]]:
        """Every key's and table's position (the whole text scanned once, on first use)."""
        if self._full is None:
            self._full = self._scan(self._source)
        return self._full

    def _scan_headers(self, source: str) -> dict[str, tuple[int, int]]:
        """The tables' positions alone: what `_scan` records for header lines."""
        out: dict[str, tuple[int, int]] = {}
        counts: dict[str, int] = {}
        number, last = 1, 0
        for found in _HEADER_LINES.finditer(source):
            number += source.count("\n", last, found.start())
            last = found.start()
            self._header(found.group(), number, counts, out)
        return out

    def _header(self, line: str, number: int, counts: dict[str, int],
                out: dict[str, tuple[int, int]]) -> list[str] | None:
        """Record a table header line; its table path, or None if it is not a header."""
        parsed = _parse_header(line)
        if parsed is None:
            return None
        names, col, array = parsed
        if array:
            parent = self._resolve(names, counts, last=False)
            index = counts.get(parent, 0)
            counts[parent] = index + 1
            table = [*parent.split("."), str(index)] if parent else [str(index)]
        else:
            table = self._resolve(names, counts).split(".")
        out.setdefault(".".join(table), (number, col))
        return table

    def _scan(self, source: str) -> dict[str, tuple[int, int]]:
        positions: dict[str, tuple[int, int]] = {}
        counts: dict[str, int] = {}
        table: list[str] = []
        in_multiline: str | None = None
        for number, line in enumerate(source.splitlines(), 1):
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            if line.lstrip().startswith("["):
                found = self._header(line, number, counts, positions)
                if found is not None:
                    table = found
                    continue
            key = _KEY.match(line)
            if key:
                path = ".".join([*table, *_split_key(key.group(2))])
                positions.setdefault(path, (number, len(key.group(1)) + 1))
                rest = line[key.end():]
                if '"""' in rest or "'''" in rest:
                    for quote in ('"""', "'''"):
                        if rest.count(quote) == 1:
                            in_multiline = quote
        return positions

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
        if self.headers is not None and path in self.headers:
            return self.headers[path]  # a table: the same line the whole scan gives
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
