"""Code intelligence: the symbols of a source file, found with tree-sitter.

    outline(path, text)         → list[Symbol] | None (None: unsupported language)
    find_symbol(symbols, spec)  → Symbol | None (`Class/method`, `Type.method`, `name@LINE`)
    find_symbols(symbols, spec) → every match, the implementation first
    outline_text(symbols)       → the skeleton as text, one symbol a line
    language_for(path)          → "python", "typescript", "tsx", "cpp", … or None

Importing this package imports neither tree-sitter nor any grammar; each
grammar loads the first time a file of its language is outlined.
"""

from __future__ import annotations

from normalize.tools.code.grammars import language_for, supported_languages
from normalize.tools.code.outline import outline
from normalize.tools.code.symbols import (
    Symbol,
    address,
    find_symbol,
    find_symbols,
    outline_text,
)

__all__ = [
    "Symbol",
    "address",
    "find_symbol",
    "find_symbols",
    "language_for",
    "outline",
    "outline_text",
    "supported_languages",
]
