"""The symbol model, symbol lookup by a nested spec, and the one outline formatter."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

LOW_RANK_KINDS = frozenset({"impl", "declaration"})
"""Kinds that lose to a same-named definition: `impl` blocks and body-less declarations."""

_SPEC_SEPARATORS = re.compile(r"::|[/.]")


@dataclass(frozen=True)
class Symbol:
    """A named definition in a source file.

    `line`/`end_line` are 1-based and inclusive; the span starts at decorators,
    annotations and attributes. `owner` names the type a method belongs to when
    the method is declared outside it (a Go receiver, a C++ `Type::method`).
    `doc` is the first line of a Python docstring.
    """

    name: str
    kind: str
    line: int
    end_line: int
    signature: str
    children: tuple[Symbol, ...] = ()
    owner: str = ""
    doc: str = ""

    def walk(self) -> Iterator[Symbol]:
        """This symbol, then every descendant, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def find_symbol(symbols: Sequence[Symbol], spec: str) -> Symbol | None:
    """The symbol named by `spec`: `name`, `Class/method` (`.` and `::` also nest).

    `Type/method` also finds methods declared outside the type (Rust `impl
    Type` blocks, Go receivers, C++ `Type::method`). A bare name not found at
    the top level is looked up anywhere. Definitions beat `impl` blocks and
    body-less declarations.
    """
    parts = [p for p in _SPEC_SEPARATORS.split(spec.strip()) if p]
    if not parts:
        return None
    hits = _find(symbols, parts)
    if not hits:
        hits = [hit for top in symbols for s in top.walk() for hit in _find(s.children, parts)]
    if not hits:
        return None
    return min(hits, key=lambda s: s.kind in LOW_RANK_KINDS)


def _find(level: Sequence[Symbol], parts: list[str]) -> list[Symbol]:
    name, rest = parts[0], parts[1:]
    hits = [s for s in level if s.name == name]
    if not rest:
        return hits
    found = [deep for hit in hits for deep in _find(hit.children, rest)]
    if len(rest) == 1:
        found += [s for s in level if s.owner == name and s.name == rest[0]]
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
    children are indented two spaces under their parent; a Python docstring's
    first line follows as `# doc`. Past `max_lines`, a last line counts what
    was left out.
    """
    rows: list[tuple[str, str]] = []
    for symbol, depth in _flatten(symbols, 0):
        where = str(symbol.line)
        if symbol.end_line > symbol.line:
            where += f"-{symbol.end_line}"
        text = "  " * depth + symbol.signature
        if docs and symbol.doc:
            text += f"  # {symbol.doc}"
        rows.append((where, text))
    hidden = 0
    if max_lines is not None and len(rows) > max_lines:
        hidden = len(rows) - max_lines
        rows = rows[:max_lines]
    width = max((len(where) for where, _ in rows), default=0)
    lines = [f"{indent}{where:>{width}}  {text}" for where, text in rows]
    if hidden:
        lines.append(f"{indent}… {hidden:,} more symbols")
    return "\n".join(lines)


def _flatten(symbols: Sequence[Symbol], depth: int) -> Iterator[tuple[Symbol, int]]:
    for symbol in symbols:
        yield symbol, depth
        yield from _flatten(symbol.children, depth + 1)
