"""Configuration keys declared once: each with its type, default, rule and one line of docs.

A typed table is a frozen dataclass whose fields are declared with `key(...)`;
`parse_table` checks a TOML table against those declarations (unknown key,
wrong type, broken rule: one message each) and builds the typed value, and
`docs_table` writes the Markdown rows the README shows. Stored, a table keeps
only the keys that differ from their defaults (`serial.stored(omit_default)`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from normalize.errors import ConfigError
from normalize.serial import Stored

__all__ = ["BOOL", "INT", "NUM", "STR", "STRS", "STR_OR_STRS", "TABLE", "Key", "Kind", "Rule",
           "at_least", "between", "check_table", "declared", "docs_table", "key",
           "not_negative", "one_of", "out_of_bounds", "parse_table", "positive", "type_name"]

T = TypeVar("T")
Fail = Callable[[str, str], ConfigError]
"""`fail(key_path, message)`: the error to raise, located where the caller can."""
_META = "normalize.key"


@dataclass(frozen=True)
class Kind:
    """A TOML type a key accepts, and how messages name it."""

    name: str  # "an integer"
    accepts: Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


STR = Kind("a string", lambda v: isinstance(v, str))
BOOL = Kind("a boolean", lambda v: isinstance(v, bool))
INT = Kind("an integer", _int)
NUM = Kind("a number", _num)
TABLE = Kind("a table", lambda v: isinstance(v, dict))
STRS = Kind("a list of strings", _strs)
FLAG_OR_NUM = Kind("a boolean or a number", lambda v: isinstance(v, bool | int | float))
FLAG_OR_STRS = Kind("a boolean or a list of hosts", lambda v: isinstance(v, bool) or _strs(v))
STR_OR_STRS = Kind("a string or a list of strings", lambda v: isinstance(v, str) or _strs(v))


@dataclass(frozen=True)
class Rule:
    """What a value must be beyond its type: the test, the message, the docs' words."""

    holds: Callable[[Any], bool]
    message: str  # str.format: {name} (how the key is named), {key}, {value}, {reason}
    doc: str
    reason: Callable[[Any], str] | None = None  # what {reason} says about a value

    bound: str = ""  # what a range rule requires, in words ("must be at least 1")

    def problem(self, name: str, value: Any, key: str = "") -> str | None:
        """The message for `value`, or None when it holds."""
        if self.holds(value):
            return None
        reason = self.reason(value) if self.reason is not None else ""
        return self.message.format(name=name, key=key, value=value, reason=reason)


def positive(message: str = "{name} must be positive, not {value}") -> Rule:
    return Rule(lambda v: v > 0, message, "more than 0")


def not_negative() -> Rule:
    return Rule(lambda v: v >= 0, "{name} must not be negative", "0 or more")


def at_least(least: int) -> Rule:
    bound = f"must be at least {least}"
    return Rule(lambda v: v >= least, f"{{name}} {bound}, not {{value}}", f"at least {least}",
                bound=bound)


def between(least: int, most: int) -> Rule:
    bound = f"must be from {least} to {most}"
    return Rule(lambda v: least <= v <= most, f"{{name}} {bound}, not {{value}}",
                f"{least} to {most}", bound=bound)


def one_of(choices: Iterable[str], what: str) -> Rule:
    options = tuple(choices)
    return Rule(lambda v: v in options,
                f"unknown {what} {{value!r}} (choose from {', '.join(options)})",
                " · ".join(f"`{c}`" for c in options))


@dataclass(frozen=True)
class Key:
    """One declared key: its TOML type, its rule (if any) and what it does."""

    kind: Kind
    doc: str
    rule: Rule | None = None


def key(default: Any, kind: Kind, doc: str, rule: Rule | None = None, *,
        factory: Callable[[], Any] | None = None, omit_default: bool = True,
        unwrap: Callable[[Any], Any] | None = None) -> Any:
    """A field declared as a key: `max_turns: int | None = key(None, INT, "…", positive())`.

    `default` may be `dataclasses.MISSING` (a key the table must give). Stored,
    the key is left out while it equals its default (unless `omit_default=False`);
    `unwrap` turns its stored JSON back into the field's type (`serial.stored`).
    """
    meta: dict[str, Any] = {_META: Key(kind, doc, rule)}
    if omit_default or unwrap is not None:
        meta["normalize.serial"] = Stored(omit_default=omit_default, unwrap=unwrap)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@functools.cache
def declared(cls: type) -> dict[str, Key]:
    """The keys `cls` declares, by name, in order (read once per class)."""
    return {f.name: f.metadata[_META] for f in dataclasses.fields(cls) if _META in f.metadata}


def type_name(value: Any) -> str:
    """How a message names the type of a value found where another was expected."""
    for kind, word in ((BOOL, "a boolean"), (NUM, "a number"), (STR, "a string")):
        if kind.accepts(value):
            return word
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def closest(name: str, allowed: Iterable[str]) -> str | None:
    """The allowed name `name` is a likely typo of, if any."""
    found = difflib.get_close_matches(name, list(allowed), n=1, cutoff=0.75)
    return found[0] if found else None


def _problem(given: str, name: str, spec: Key, value: Any) -> str | None:
    """Why `value` does not fit `spec`, or None."""
    if not spec.kind.accepts(value):
        return f"{name} must be {spec.kind.name}, not {type_name(value)}"
    return spec.rule.problem(name, value, given) if spec.rule is not None else None


def out_of_bounds(cls: type, name: str, value: Any) -> str | None:
    """What the range rule of `cls`'s key `name` requires, when `value` breaks it."""
    rule = declared(cls)[name].rule
    if rule is None or not rule.bound or rule.holds(value):
        return None
    return rule.bound


def check_table(cls: type, table: Mapping[str, Any], where: str, fail: Fail | None = None,
                *, name: Callable[[str], str] = repr) -> dict[str, Any]:
    """The keys of `table` checked against those `cls` declares (None values left out).

    `where` is the table's key path (`workflow.llm`); `fail` locates an error
    (default: a plain one); `name` says how a message names a key.
    """
    make = fail or (lambda _path, message: ConfigError(message))
    keys = declared(cls)
    values: dict[str, Any] = {}
    for given, value in table.items():
        spec = keys.get(given)
        if spec is None:
            near = closest(given, keys)
            hint = f"; did you mean {near!r}?" if near else ""
            raise make(f"{where}.{given}", f"unknown key {given!r} in [{where}]{hint}")
        if value is None:
            continue
        problem = _problem(given, name(given), spec, value)
        if problem:
            raise make(f"{where}.{given}", problem)
        values[given] = value
    return values


def parse_table(cls: type[T], table: Mapping[str, Any], where: str, fail: Fail | None = None,
                *, name: Callable[[str], str] = repr) -> T:
    """`table` checked against the keys `cls` declares (`check_table`), as a `cls`."""
    return cls(**_typed(cls, check_table(cls, table, where, fail, name=name)))


def _typed(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """TOML values as the fields' types: arrays as tuples where declared, numbers as written."""
    hints = _hints(cls)
    return {k: _as(hints[k], v) for k, v in values.items()}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _as(tp: Any, value: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)] \
        if typing.get_origin(tp) in (typing.Union, types.UnionType) else [tp]
    if isinstance(value, list) and any(typing.get_origin(a) is tuple for a in args):
        return tuple(value)
    return value


def _shown(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None or value in ((), {}, ""):
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def docs_table(tables: Mapping[str, type]) -> str:
    """The Markdown rows of every declared key: table (as written: `[workflow.llm]`), key,
    type, default, rule, meaning."""
    rows = ["| table | key | type | default | allowed | what it does |",
            "|---|---|---|---|---|---|"]
    for table, cls in tables.items():
        defaults = {f.name: f for f in dataclasses.fields(cls)}
        for field_name, spec in declared(cls).items():
            f = defaults[field_name]
            default = f.default if f.default_factory is dataclasses.MISSING \
                else f.default_factory()  # (MISSING for a required key)
            rule = spec.rule.doc if spec.rule is not None else ""
            rows.append(f"| `{table}` | `{field_name}` | {spec.kind.name} | "
                        f"{_shown(default)} | {rule} | {spec.doc} |")
    return "\n".join(rows)
