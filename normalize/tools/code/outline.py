"""`outline`: the symbols of a source file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.tools.code.grammars import language_for, parser_for
from normalize.tools.code.languages import RULES
from normalize.tools.code.macros import blank_macros, first_branches
from normalize.tools.code.symbols import Symbol
from normalize.tools.code.walker import Walker

if TYPE_CHECKING:
    from tree_sitter import Parser

_SHELL_FUNCTION = re.compile(
    rb"^[ \t]*(?:function[ \t]+[^\s(){}]+|[^\s(){}=#$'\"`;&|<>]+[ \t]*\([ \t]*\))", re.MULTILINE
)
"""A line that starts a shell function, `name()` or `function name`."""


def outline(path: Path | str, text: str) -> list[Symbol] | None:
    """The top-level symbols of `text` (children nested), or None when the language is unsupported.

    `path` only picks the grammar; nothing is read from disk.
    """
    language = language_for(path)
    if language is None:
        return None
    parser = parser_for(language)
    if parser is None:
        return None
    src = text.encode("utf-8", "replace")
    parsed = blank_macros(src) if language in ("c", "cpp") else src
    tree = parser.parse(parsed)
    symbols = Walker(src, RULES[language], parsed).block(tree.root_node, "module")
    if language in ("c", "cpp", "csharp") and tree.root_node.has_error:
        # braces that balance only branch by branch: try each `#if`'s first branch alone
        retry = first_branches(parsed)
        other = parser.parse(retry)
        found = Walker(src, RULES[language], retry).block(other.root_node, "module")
        if _count(found) > _count(symbols):
            return found
    if language == "bash" and tree.root_node.has_error:
        pieces = _shell_pieces(parser, src)
        if _count(pieces) > _count(symbols):
            return pieces
    return symbols


def _shell_pieces(parser: Parser, src: bytes) -> list[Symbol]:
    """Each shell function parsed on its own, from its first line to the next function at
    column 0, the rest blanked (offsets kept), so one construct tree-sitter-bash misreads
    spoils no function after it. A function it cannot read at all is still listed, from its
    name line to the first `}` at that line's indentation."""
    starts = [m.start() for m in _SHELL_FUNCTION.finditer(src)]
    column0 = [start for start in starts if src[start : start + 1] not in b" \t"]
    blank = re.sub(rb"[^\n]", b" ", src)
    found: list[Symbol] = []
    for start in starts:
        line = src.count(b"\n", 0, start) + 1
        if any(s.line <= line <= s.end_line for s in found):
            continue  # nested in a function already found
        end = next((c for c in column0 if c > start), len(src))
        piece = blank[:start] + src[start:end]
        tree = parser.parse(piece)
        symbols = Walker(src, RULES["bash"], piece).block(tree.root_node, "module")
        kept = [s for s in symbols if s.line == line]
        found += kept or _unparsed_function(src, start, end, line)
    return found


def _unparsed_function(src: bytes, start: int, end: int, line: int) -> list[Symbol]:
    eol = src.find(b"\n", start)
    head = src[start : eol if eol >= 0 else len(src)].decode("utf-8", "replace")
    indent = head[: len(head) - len(head.lstrip())]
    lines = src[start:end].decode("utf-8", "replace").split("\n")
    close = next((n for n, text in enumerate(lines) if n and text.rstrip() == indent + "}"), None)
    if close is None:
        return []
    words = head.split()
    name = (words[1] if words[0] == "function" else head).split("(")[0].strip()
    signature = head.strip().removesuffix("{").strip()
    return [Symbol(name=name, kind="function", line=line, end_line=line + close,
                   signature=signature)]  # fmt: skip


def _count(symbols: list[Symbol]) -> int:
    return sum(1 for top in symbols for _ in top.walk())
