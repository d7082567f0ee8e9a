"""The workflow file format as data: allowed keys, their types, and the fixed choices.

The loader validates against these tables; other modules (`normalize
plugins`) read them too, so the format is written down once. The `[workflow]`
sub-tables (context, cache, retry, limits, llm, permissions) are declared
with their types in `normalize.tables`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from normalize.tables import CACHE_STRATEGIES, CONTEXT_STRATEGIES, RETRY_STRATEGIES

STRATEGIES = {
    "context": CONTEXT_STRATEGIES,
    "cache": CACHE_STRATEGIES,
    "retry": RETRY_STRATEGIES,
}
ON_ERROR = ("fail", "skip", "retry", "continue")
ON_INTERRUPT = ("rerun", "fail", "ask")
BUILTIN_CONDITIONS = ("success", "failure", "always", "llm")
BUILTIN_VARS = ("task", "workspace", "notes")
STATE_VARS = ("state", "visits")
TRANSFORMS = ("json", "regex", "lines", "strip", "format")
DEFAULT_MAX_ITERATIONS = 10
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VAR_TOKEN_RE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.-]*\}")

Checker = Callable[[Any], bool]
_str: Checker = lambda v: isinstance(v, str)  # noqa: E731
_bool: Checker = lambda v: isinstance(v, bool)  # noqa: E731
_int: Checker = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
_num: Checker = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
_table: Checker = lambda v: isinstance(v, dict)  # noqa: E731
_strs: Checker = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
_str_or_table: Checker = lambda v: isinstance(v, str | dict)  # noqa: E731
_tables: Checker = lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v)  # noqa: E731

TYPE_NAMES = {_str: "a string", _bool: "a boolean", _int: "an integer", _num: "a number",
              _table: "a table", _strs: "a list of strings", _str_or_table: "a string or a table",
              _tables: "an array of tables"}

SCHEMAS: dict[str, dict[str, Checker]] = {
    "root": {"workflow": _table, "steps": _tables, "states": _tables},
    "workflow": {"name": _str, "description": _str, "version": _int, "vars": _table,
                 "context": _str_or_table, "cache": _str_or_table, "retry": _str_or_table,
                 "limits": _table, "llm": _table, "permissions": _table, "steps": _tables,
                 "driver": _str, "on_interrupt": _str, "mcp": _tables, "hooks": _tables,
                 "output_schema": _str, "output_retries": _int, "workspace": _str,
                 "on_item_error": _str, "memory_top_k": _int, "memory": _str,
                 "skills": _strs},
    "step": {"name": _str, "action": _str, "capture": _str, "transform": _str, "on_error": _str,
             "on_interrupt": _str, "condition": _str, "for_each": _str, "as": _str,
             "parallel": _bool, "max_concurrency": _int, "steps": _tables, "context": _str,
             "cache": _str, "retry": _str_or_table, "timeout": _num, "workflow": _str,
             "prompt": _str, "max_turns": _int, "until": _str, "max_iterations": _int,
             "else": _tables, "schema": _str, "isolation": _str, "merge": _str,
             "harness": _str},
    "state": {"name": _str, "action": _str, "transitions": _tables, "terminal": _bool,
              "status": _str, "summary": _str,
              "on_entry": _str, "on_exit": _str, "capture": _str, "timeout": _num,
              "on_interrupt": _str, "workflow": _str, "prompt": _str, "max_turns": _int,
              "harness": _str},
    "transition": {"condition": _str, "next": _str},
}
