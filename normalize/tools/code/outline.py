"""`outline`: the symbols of a source file."""

from __future__ import annotations

from pathlib import Path

from normalize.tools.code.grammars import language_for, parser_for
from normalize.tools.code.languages import RULES
from normalize.tools.code.macros import blank_macros, first_branches
from normalize.tools.code.symbols import Symbol
from normalize.tools.code.walker import Walker


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
    if language in ("c", "cpp") and tree.root_node.has_error:
        # braces that balance only branch by branch: try each `#if`'s first branch alone
        retry = first_branches(parsed)
        other = parser.parse(retry)
        found = Walker(src, RULES[language], retry).block(other.root_node, "module")
        if _count(found) > _count(symbols):
            return found
    return symbols


def _count(symbols: list[Symbol]) -> int:
    return sum(1 for top in symbols for _ in top.walk())
