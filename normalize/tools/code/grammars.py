"""Which grammar parses which file, loaded on first use.

Nothing here imports tree-sitter at module level: a grammar (and tree-sitter
itself) is imported the first time a file of its language is parsed. Parsers
are not thread-safe, so each thread keeps its own; `Language` objects are
shared.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Parser

GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "php": ("tree_sitter_php", "language_php"),
    "bash": ("tree_sitter_bash", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "swift": ("tree_sitter_swift", "language"),
    "scala": ("tree_sitter_scala", "language"),
    "lua": ("tree_sitter_lua", "language"),
}
"""Language name → (grammar module, function returning its language pointer)."""

_EXTENSIONS_BY_LANGUAGE = {
    "python": ".py .pyi",
    "javascript": ".js .mjs .cjs .jsx",
    "typescript": ".ts .mts .cts",
    "tsx": ".tsx",
    "go": ".go",
    "rust": ".rs",
    "java": ".java",
    "c": ".c",
    # C++ parses C headers well and C++ headers correctly; the C grammar fails on the latter.
    "cpp": ".h .cc .cpp .cxx .c++ .hh .hpp .hxx .h++ .ipp",
    "ruby": ".rb .rake .gemspec",
    "csharp": ".cs",
    "php": ".php",
    "bash": ".sh .bash",
    "kotlin": ".kt .kts",
    "swift": ".swift",
    "scala": ".scala .sc",
    "lua": ".lua",
}
EXTENSIONS: dict[str, str] = {
    ext: language for language, exts in _EXTENSIONS_BY_LANGUAGE.items() for ext in exts.split()
}

_languages: dict[str, Language | None] = {}
_lock = threading.Lock()
_local = threading.local()


def language_for(path: Path | str) -> str | None:
    """The grammar name for a file (`python`, `tsx`, `cpp`, …), or None when unsupported."""
    return EXTENSIONS.get(os.path.splitext(str(path))[1].lower())


def supported_languages() -> list[str]:
    """The grammar names `outline` understands, sorted."""
    return sorted(GRAMMARS)


def parser_for(language: str) -> Parser | None:
    """This thread's parser for `language`; None when the grammar cannot be loaded."""
    parsers: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    parser = parsers.get(language)
    if parser is None:
        grammar = _language(language)
        if grammar is None:
            return None
        from tree_sitter import Parser

        parser = parsers[language] = Parser(grammar)
    return parser


def _language(language: str) -> Language | None:
    with _lock:
        if language in _languages:
            return _languages[language]
        module_name, function = GRAMMARS[language]
        try:
            from tree_sitter import Language

            module = importlib.import_module(module_name)
            grammar = Language(getattr(module, function)())
        except (ImportError, AttributeError, ValueError):
            grammar = None
        _languages[language] = grammar
        return grammar
