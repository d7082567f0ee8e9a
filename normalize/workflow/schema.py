"""The workflow file format as data: allowed keys, their types, and the fixed choices.

The loader validates against these tables; other modules (the LLM driver's
`[workflow.llm]` check, `normalize plugins`) read them too, so the format is
written down once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

STRATEGIES = {
    "context": ("task_tree", "task_list", "flat", "conversation", "none"),
    "cache": ("none", "memory", "persistent"),
    "retry": ("none", "fixed", "exponential"),
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
_flag_or_num: Checker = lambda v: isinstance(v, bool | int | float)  # noqa: E731
_flag_or_strs: Checker = lambda v: isinstance(v, bool) or _strs(v)  # noqa: E731

TYPE_NAMES = {_str: "a string", _bool: "a boolean", _int: "an integer", _num: "a number",
              _table: "a table", _strs: "a list of strings", _str_or_table: "a string or a table",
              _tables: "an array of tables", _flag_or_num: "a boolean or a number",
              _flag_or_strs: "a boolean or a list of hosts"}

MAX_REPO_MAP = 16_384
"""The largest repo map (tokens) the prefix may hold: it is in every request."""

RANGES: dict[str, dict[str, tuple[int, int | None]]] = {
    "context": {"max_results": (1, None), "max_history": (0, None),
                "compact_after_chars": (0, None), "repo_map": (0, MAX_REPO_MAP)},
}
"""Table → integer key → (least, most or None): values outside are errors at their line."""


def out_of_range(schema: str, key: str, value: int) -> str | None:
    """`must be …` when `value` is outside the range of `key` in the `schema` table, else None."""
    least, most = RANGES.get(schema, {}).get(key, (None, None))
    if (least is not None and value < least) or (most is not None and value > most):
        return f"must be from {least} to {most}" if most is not None else \
            f"must be at least {least}"
    return None


SCHEMAS: dict[str, dict[str, Checker]] = {
    "root": {"workflow": _table, "steps": _tables, "states": _tables},
    "workflow": {"name": _str, "description": _str, "version": _int, "vars": _table,
                 "context": _str_or_table, "cache": _str_or_table, "retry": _str_or_table,
                 "limits": _table, "llm": _table, "permissions": _table, "steps": _tables,
                 "driver": _str, "on_interrupt": _str, "mcp": _tables, "hooks": _tables,
                 "output_schema": _str, "output_retries": _int, "workspace": _str,
                 "on_item_error": _str},
    "context": {"strategy": _str, "max_results": _int, "max_history": _int,
                "compact_after_chars": _int, "repo_map": _int},
    "cache": {"strategy": _str, "preview_length": _int, "preview_lines": _int,
              "asked_lines": _int, "asked_chars": _int, "ttl_seconds": _num, "max_bytes": _int},
    "retry": {"strategy": _str, "max_attempts": _int, "base_delay": _num, "max_delay": _num,
              "jitter": _flag_or_num},
    "limits": {"max_turns": _int, "max_tokens": _int, "max_cost_usd": _num,
               "timeout_seconds": _num},
    "llm": {"provider": _str, "model": _str, "fallback": _strs, "system_prompt": _str,
            "system_prompt_file": _str, "max_actions": _int, "allow_parallel": _bool,
            "thinking": _bool, "base_url": _str, "max_tokens": _int, "temperature": _num,
            "prices": _table},
    "permissions": {"mode": _str, "allow": _strs, "deny": _strs, "allow_shell": _bool,
                    "network": _flag_or_strs, "sandbox": _str, "env_allow": _strs},
    "step": {"name": _str, "action": _str, "capture": _str, "transform": _str, "on_error": _str,
             "on_interrupt": _str, "condition": _str, "for_each": _str, "as": _str,
             "parallel": _bool, "max_concurrency": _int, "steps": _tables, "context": _str,
             "cache": _str, "retry": _str_or_table, "timeout": _num, "workflow": _str,
             "prompt": _str, "max_turns": _int, "until": _str, "max_iterations": _int,
             "else": _tables, "schema": _str},
    "state": {"name": _str, "action": _str, "transitions": _tables, "terminal": _bool,
              "status": _str, "summary": _str,
              "on_entry": _str, "on_exit": _str, "capture": _str, "timeout": _num,
              "on_interrupt": _str, "workflow": _str, "prompt": _str, "max_turns": _int},
    "transition": {"condition": _str, "next": _str},
    "mcp": {"name": _str, "command": _str, "args": _strs, "env": _table, "url": _str,
            "timeout": _num, "tools": _strs, "sandbox": _str, "network": _bool},
}
