"""The symbol model, symbol lookup by a nested spec, and the one outline formatter."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

LOW_RANK_KINDS = frozenset({"impl", "declaration", "overload"})
"""Kinds that lose to a same-named definition: `impl` blocks, body-less declarations and
Python `@overload` stubs."""

_SPEC_SEPARATORS = re.compile(r"::|[/.]")
_AT_LINE = re.compile(r"@(\d+)$")


@dataclass(frozen=True)
class Symbol:
    """A named definition in a source file.

    `line`/`end_line` are 1-based and inclusive; the span starts at decorators,
    annotations and attributes. `owner` names the type a method belongs to when
    the method is declared outside it (a Go receiver, a C++ `Type::method`).
    `doc` is the first line of its documentation (a Python docstring, or the
    comment right above it); `doc_line` is where that comment starts (0: none).
    """

    name: str
    kind: str
    line: int
    end_line: int
    signature: str
    children: tuple[Symbol, ...] = ()
    owner: str = ""
    doc: str = ""
    doc_line: int = 0

    @property
    def first_line(self) -> int:
        """The first line `view` shows and `edit` replaces: the doc comment's, else the symbol's."""
        return self.doc_line or self.line

    def walk(self) -> Iterator[Symbol]:
        """This symbol, then every descendant, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def find_symbol(symbols: Sequence[Symbol], spec: str) -> Symbol | None:
    """The symbol named by `spec`: `name`, `Class/method` (`.` and `::` also nest), `name@LINE`.

    `Type/method` also finds methods declared outside the type (Rust `impl
    Type` blocks, Go receivers, C++ `Type::method`). A bare name not found at
    the top level is looked up anywhere. Definitions beat `impl` blocks,
    body-less declarations and `@overload` stubs.
    """
    hits = find_symbols(symbols, spec)
    return hits[0] if hits else None


def find_symbols(symbols: Sequence[Symbol], spec: str) -> list[Symbol]:
    """Every symbol `spec` names, the implementation first, then in file order.

    `name@LINE` keeps only the one whose header is at LINE, or else the narrowest
    whose lines (doc comment included) hold LINE.
    """
    spec = spec.strip()
    at = _AT_LINE.search(spec)
    if at is not None:
        spec = spec[: at.start()]
    parts = [p for p in _SPEC_SEPARATORS.split(spec) if p]
    if not parts:
        return []
    hits = _find(symbols, parts)
    if not hits:
        hits = [hit for top in symbols for s in top.walk() for hit in _find(s.children, parts)]
    unique = list({(s.line, s.end_line, s.name): s for s in hits}.values())
    if at is not None:
        unique = _at_line(unique, int(at.group(1)))
    return sorted(unique, key=lambda s: (s.kind in LOW_RANK_KINDS, s.line))


def _at_line(found: list[Symbol], line: int) -> list[Symbol]:
    """The one of `found` at `line`: its header there, else the narrowest span holding it."""
    holding = [s for s in found if s.first_line <= line <= s.end_line]
    headed = [s for s in holding if s.first_line <= line <= s.line]
    if len(headed) == 1 or not holding:
        return headed or holding
    narrowest = min(holding, key=lambda s: s.end_line - s.first_line)
    return [narrowest]


def address(symbol: Symbol) -> str:
    """How to name exactly this one among same-named symbols: `name@LINE`."""
    return f"{symbol.name}@{symbol.line}"


def base_name(name: str) -> str:
    """A name without template arguments: `formatter<std::string, char>` → `formatter`."""
    return name.split("<", 1)[0].rstrip()


def _test_macro(symbol: Symbol, name: str) -> bool:
    """A test case (`TEST(Suite, Name) {…}`) also answers to its macro's name."""
    return symbol.kind == "test" and symbol.signature.startswith(name + "(")


def _find(level: Sequence[Symbol], parts: list[str]) -> list[Symbol]:
    name, rest = parts[0], parts[1:]
    hits = [s for s in level if s.name == name or base_name(s.name) == name or _test_macro(s, name)]
    if not rest:
        return hits
    found = [deep for hit in hits for deep in _find(hit.children, rest)]
    if len(rest) == 1:
        found += [s for s in level if s.owner == name and s.name == rest[0]]
    return found


@dataclass(frozen=True)
class Row:
    """One line of an outline: a symbol, how deep it is nested, and the path of its parents."""

    symbol: Symbol
    depth: int
    parent: str


def rows(symbols: Sequence[Symbol]) -> list[Row]:
    """Every symbol as an outline row, depth first (the order `outline_text` prints them)."""
    out: list[Row] = []

    def add(level: Sequence[Symbol], depth: int, parent: str) -> None:
        for symbol in level:
            out.append(Row(symbol, depth, parent))
            add(symbol.children, depth + 1, f"{parent}/{symbol.name}" if parent else symbol.name)

    add(symbols, 0, "")
    return out


def nest(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`skeleton`'s records (depth first) as nested symbols: name, kind, lines, signature,
    doc, children; a directory's grouped per file (`path`, `symbols`)."""
    files: dict[str, list[dict[str, Any]]] = {}
    open_nodes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        path, parent = str(item.get("path", "")), str(item["parent"])
        node: dict[str, Any] = {
            "name": item["name"], "kind": item["kind"], "lines": [item["start"], item["end"]],
            "signature": item["signature"], "doc": item["doc"], "children": []}  # fmt: skip
        roots = files.setdefault(path, [])
        open_nodes.get((path, parent), roots).append(node)
        open_nodes[(path, f"{parent}/{item['name']}" if parent else str(item["name"]))] = (
            node["children"])
    if set(files) == {""}:
        return files[""]
    return [{"path": path, "symbols": symbols} for path, symbols in files.items()]


def format_rows(page: Sequence[Row], *, docs: bool = True, indent: str = "",
                lines: bool = True) -> list[str]:
    """Rows as `START-END  signature` lines, nested by indentation, the ranges right-aligned.

    Without `lines`, the signatures alone (nested the same way).
    """
    if not lines:
        return [f"{indent}{'  ' * row.depth}{row.symbol.signature}"
                + (f"  # {row.symbol.doc}" if docs and row.symbol.doc else "") for row in page]
    cells: list[tuple[str, str]] = []
    for row in page:
        symbol = row.symbol
        where = str(symbol.line)
        if symbol.end_line > symbol.line:
            where += f"-{symbol.end_line}"
        text = "  " * row.depth + symbol.signature
        if docs and symbol.doc:
            text += f"  # {symbol.doc}"
        cells.append((where, text))
    width = max((len(where) for where, _ in cells), default=0)
    return [f"{indent}{where:>{width}}  {text}" for where, text in cells]


def record(row: Row, path: str = "") -> dict[str, object]:
    """A row as JSON: kind, name, parent path, start, end, signature, doc and doc line."""
    symbol = row.symbol
    found: dict[str, object] = {
        "kind": symbol.kind,
        "name": symbol.name,
        "parent": row.parent or symbol.owner,
        "start": symbol.line,
        "end": symbol.end_line,
        "signature": symbol.signature,
        "doc": symbol.doc,
        "doc_line": symbol.doc_line or None,
    }
    if path:
        found = {"path": path, **found}
    return found


def outline_text(
    symbols: Sequence[Symbol],
    *,
    max_lines: int | None = None,
    docs: bool = True,
    indent: str = "",
) -> str:
    """Format symbols one per line: `START-END  signature`, nested by indentation.

    The line range is right-aligned (a one-line symbol shows just its line);
    children are indented two spaces under their parent; a docstring's or doc
    comment's first line follows as `# doc`. Past `max_lines`, a last line
    counts what was left out.
    """
    every = rows(symbols)
    page = every if max_lines is None else every[:max_lines]
    lines = format_rows(page, docs=docs, indent=indent)
    if len(page) < len(every):
        lines.append(f"{indent}… {len(every) - len(page):,} more symbols")
    return "\n".join(lines)
