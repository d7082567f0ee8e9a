"""`{var}` interpolation in workflow strings; `{{` and `}}` stand for literal braces.

A list value becomes its items separated by spaces (or by newlines when an
item spans several lines); `{name.field}` and `{name.0}` reach into values.
This is for text; a step's command binds values as arguments instead
(`normalize.workflow.argv`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_VAR = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.-]*)\}")


def variables_in(text: str) -> list[str]:
    """The variable names `text` refers to, in order."""
    return [m.group(1) for m in _VAR.finditer(text) if m.group(1)]


def lookup_value(name: str, values: Mapping[str, Any]) -> Any:
    """The value `{name}` stands for (`a.b`, `a.0` reach into it); KeyError when unknown."""
    if name in values:
        return values[name]
    head, _, rest = name.partition(".")
    value: Any = values[head]
    for part in rest.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def interpolate(text: str, values: Mapping[str, Any]) -> str:
    """Replace `{name}` (and `{name.field}`) with its value; unknown names raise KeyError."""

    def sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        value = lookup_value(match.group(1), values)
        if isinstance(value, list):  # words on one line; multi-line items one after another
            sep = "\n" if any("\n" in str(v) for v in value) else " "
            return sep.join(str(v) for v in value)
        return str(value)

    return _VAR.sub(sub, text)


def interpolate_known(text: str, values: Mapping[str, Any]) -> str:
    """Like `interpolate`, but a name not (yet) known stays as `{name}`."""

    def sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.group(1) is None:
            return token
        try:
            return interpolate(token, values)
        except (KeyError, IndexError, TypeError):
            return token

    return _VAR.sub(sub, text)
