"""The bounds every workflow file is held to, and where a file oversteps them.

A file over the bounds is a `ConfigError` at its place, never a crash: read
as bytes (at most `MAX_FILE_BYTES`), decoded as UTF-8 (a bad byte named by
line and column), parsed (values nested past the parser's recursion located
by a scan of the text), then walked without recursion for values nested
deeper than `MAX_DEPTH` (dotted keys make them too) and strings longer than
`MAX_STRING`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError

MAX_FILE_BYTES = 16 * 1024 * 1024
"""A workflow file's size (16 MiB: a 100,000-step workflow is about 6 MiB)."""
MAX_STRING = 1024 * 1024
"""One string value's length in characters (1 MiB: a prompt of some 250,000 tokens)."""
MAX_DEPTH = 64
"""Tables and arrays nested in one another (a real workflow nests fewer than ten)."""
MAX_NESTED_DEPTH = 16
"""Nested workflow files, one inside the next (`workflow = "other.toml"`)."""
MAX_NESTED_FILES = 256
"""Nested workflow files loaded for one workflow in all (each inclusion counts)."""


class LimitError(ConfigError):
    """A workflow past one of its bounds: the check ends there (later steps would repeat it)."""


_TOKENS = re.compile(r"\"\"\"|'''|\\.|[\"'#\[\]{}\n]", re.DOTALL)


def read_source(path: Path) -> str:
    """The file's text: at most `MAX_FILE_BYTES`, valid UTF-8 (else a located error)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such workflow file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a workflow file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB, the most a "
                          f"workflow file may be")
    return decode(raw, str(path))


def decode(raw: bytes, label: str) -> str:
    """`raw` as UTF-8; a bad byte is an error at its line and column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw.count(b"\n", 0, exc.start) + 1
        col = len(raw[start:exc.start].decode("utf-8", "replace")) + 1
        raise ConfigError(f"not UTF-8 (byte 0x{raw[exc.start]:02x}: {exc.reason})", file=label,
                          line=line, col=col) from None


def too_deep(source: str, label: str) -> ConfigError:
    """The error for values nested past `MAX_DEPTH`, at the bracket that goes one too deep."""
    line, col = _deep_bracket(source) or (1, 1)
    return LimitError(f"values nested more than {MAX_DEPTH} deep", file=label, line=line,
                       col=col)


def _deep_bracket(source: str) -> tuple[int, int] | None:
    """Line and column of the first `[` or `{` past `MAX_DEPTH` (strings and comments skipped)."""
    depth, line, line_start = 0, 1, 0
    quote: str | None = None
    comment = False
    for found in _TOKENS.finditer(source):
        token = found.group()
        if token.endswith("\n"):  # a newline, or a backslash at a line's end
            line, line_start, comment = line + 1, found.end(), False
            quote = quote if quote in ('"""', "'''") else None
        elif comment or (token[0] == "\\" and quote not in ('"', '"""')):
            if quote == "'" and token[1:] == "'":  # a literal string ends with its backslash
                quote = None
        elif quote is not None:
            quote = None if token == quote else quote
        elif token in ('"""', "'''", '"', "'"):
            quote = token
        elif token == "#":
            comment = True
        elif token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, found.start() - line_start + 1
        elif token in "]}":
            depth = max(0, depth - 1)
    return None


def as_limit(found: ConfigError) -> LimitError:
    """`found` (a located problem) as a `LimitError`."""
    return LimitError(found.text, file=found.file, line=found.line, col=found.col)


_Trail = tuple[Any, Any] | None
"""A value's key path, innermost key last: (parent trail, key), None at the top."""


def check_values(data: dict[str, Any], source: str, label: str,
                 fail: Callable[[str, str], ConfigError]) -> None:
    """Every value nests at most `MAX_DEPTH` deep and every string is at most `MAX_STRING` long.

    A walk with its own stack (a dotted key 5,000 parts long nests as deep);
    a value's key path is spelt only for an error. Strings are measured only
    in a file long enough to hold one too long.
    """
    strings = len(source) > MAX_STRING
    stack: list[tuple[Any, int, _Trail]] = [(data, 0, None)]
    while stack:
        value, depth, trail = stack.pop()
        if depth > MAX_DEPTH:
            if _deep_bracket(source) is not None:
                raise too_deep(source, label)
            raise as_limit(fail(_leaf(_spelt(trail), value),
                                f"values nested more than {MAX_DEPTH} deep"))
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, (trail, key)))
            elif strings and isinstance(item, str) and len(item) > MAX_STRING:
                raise as_limit(fail(_spelt((trail, key)), f"a string of {len(item):,} "
                                    f"characters; at most {MAX_STRING:,} are allowed"))


def _spelt(trail: _Trail) -> str:
    keys: list[str] = []
    while trail is not None:
        trail, key = trail
        keys.append(str(key))
    return ".".join(reversed(keys))


def _leaf(path: str, value: Any) -> str:
    """The key path down to a leaf through first entries (a long dotted key's own path)."""
    while isinstance(value, dict | list) and value:
        key, value = next(iter(value.items())) if isinstance(value, dict) else (0, value[0])
        path = f"{path}.{key}" if path else str(key)
    return path
