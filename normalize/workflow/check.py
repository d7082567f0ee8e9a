"""The checks every workflow table gets: allowed keys and types, choices, positions in errors.

A problem is a ConfigError at the key's line and column (`FILE:LINE:COL: message`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.keys import closest, type_name
from normalize.workflow.locate import Locator
from normalize.workflow.schema import SCHEMAS, TYPE_NAMES


class Checker:
    """Validation state for one file: its source positions and the generic checks."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.locator = Locator(source)

    def fail(self, key_path: str, message: str) -> ConfigError:
        pos = self.locator.find(key_path)
        line, col = pos if pos else (1, 1)
        return ConfigError(message, file=str(self.path), line=line, col=col)

    def line_of(self, key_path: str) -> int:
        pos = self.locator.find(key_path)
        return pos[0] if pos else 0

    def table(self, data: Mapping[str, Any], schema: str, where: str) -> None:
        """Every key of `data` is one the schema allows, with a value of its type."""
        allowed = SCHEMAS[schema]
        for key, value in data.items():
            path = f"{where}.{key}" if where else key
            check = allowed.get(key)
            if check is None:
                near = closest(key, allowed)
                hint = f"; did you mean {near!r}?" if near else ""
                raise self.fail(path, f"unknown key {key!r} in [{where or 'top level'}]{hint}")
            if not check(value):
                raise self.fail(path, f"{key!r} must be {TYPE_NAMES[check]}, "
                                      f"not {type_name(value)}")

    def choice(self, value: str | None, choices: tuple[str, ...], path: str, what: str) -> None:
        if value is not None and value not in choices:
            raise self.fail(path, f"unknown {what} {value!r} (choose from {', '.join(choices)})")

    def positive(self, table: Mapping[str, Any], key: str, where: str) -> None:
        value = table.get(key)
        if value is not None and value <= 0:
            raise self.fail(f"{where}.{key}", f"{key!r} must be positive, not {value}")

