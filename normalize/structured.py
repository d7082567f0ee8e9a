"""Structured results: a JSON Schema the model's final answer must meet (`--output-schema`).

The model ends with `done SUMMARY <<EOF`, the JSON value, `EOF` (or `done`
followed by the JSON on one line). The value is checked with `jsonschema`
(imported on first use); an invalid one goes back to the model with the
validator's message, at most `retries` times, then the task fails with it.

A schema is untrusted input (a workspace's workflow may name it): it is read
from one file and nothing it names is fetched (a `referencing` registry with
no retrieval: a `$ref` is `#…`, inside the same document; `http://` and
`file://` are refused when the schema is loaded); it is bounded in bytes,
depth and size before any validator walks it; a `$ref` that loops without
end is one line, at load when a plain value meets it, else at the check.
A workflow's `output_schema` is a relative path beneath the workflow file's
own directory (`schema_beside`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.errors import UsageError
from normalize.serial import Record

__all__ = ["DEFAULT_RETRIES", "MAX_RETRIES", "MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH",
           "MAX_SCHEMA_NODES", "Checked", "OutputContract", "check", "load_contract",
           "mismatch", "schema_beside"]

MAX_SCHEMA_BYTES = 1_000_000
MAX_SCHEMA_DEPTH = 64
"""Nested objects and arrays in a schema (a result's shape rarely needs ten)."""
MAX_SCHEMA_NODES = 20_000
"""Values in a schema, all levels counted (a property is at least two)."""
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_PROBES: tuple[Any, ...] = (None, {}, [], "", 0)

DEFAULT_RETRIES = 2
"""How many times an invalid result goes back to the model before the task fails."""
MAX_RETRIES = 20
"""The most `output_retries` (`--output-retries`) may ask for."""

HOW = ("End the task with `done`, a one-line summary, then the result as JSON in a heredoc:\n"
       "done SUMMARY <<EOF\n{...}\nEOF\n"
       "The JSON must be valid against this JSON Schema:\n")


@dataclass(frozen=True)
class OutputContract(Record):
    """The schema a task's result must meet, where it came from, and the retries allowed."""

    schema: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    retries: int = DEFAULT_RETRIES

    def instructions(self) -> str:
        """What the model is told (it stays the same each turn: part of the cached prefix)."""
        return HOW + json.dumps(self.schema, indent=1, sort_keys=True)


@dataclass(frozen=True)
class Checked:
    """A result as read from `done`: the value when valid, else why not."""

    value: Any = None
    error: str | None = None


def schema_beside(workflow: Path, value: str) -> Path:
    """A workflow's `output_schema`: relative, beneath the workflow's directory (links
    resolved), else a `UsageError` (a workspace's workflow may not name any file)."""
    base = workflow.parent.resolve()
    target = (base / value).resolve()
    if Path(value).is_absolute() or not target.is_relative_to(base):
        raise UsageError(f"output_schema {value!r}: must be a file beside the workflow or "
                         "below its directory")
    return target


def load_contract(path: Path, retries: int = DEFAULT_RETRIES, *,
                  flag: str = "--output-schema") -> OutputContract:
    """Read and check a schema file; a bad one is one line naming it."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SCHEMA_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCHEMA_BYTES:
        raise UsageError(f"{flag} {path}: larger than {MAX_SCHEMA_BYTES:,} bytes")
    try:
        schema = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise UsageError(f"{flag} {path}: nested more than {MAX_SCHEMA_DEPTH} deep") from None
    except ValueError as exc:
        raise UsageError(f"{flag} {path}: not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise UsageError(f"{flag} {path}: a JSON Schema is an object")
    problem = _unbounded(schema)
    if problem is not None:
        raise UsageError(f"{flag} {path}: {problem}")
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
        for probe in _PROBES:  # a `$ref` loop a plain value meets, or a pointer to nothing
            _errors(schema, probe)
    except jsonschema.SchemaError as exc:
        raise UsageError(f"{flag} {path}: not a valid JSON Schema: {exc.message}") from None
    except _SchemaLoopError as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None
    if not 0 <= retries <= MAX_RETRIES:
        raise UsageError(f"output_schema retries {retries}: must be from 0 to {MAX_RETRIES}")
    return OutputContract(schema=schema, source=str(path), retries=retries)


def _parsed(summary: str) -> tuple[bool, Any]:
    """The JSON in a `done`: all of it, or all after its first line."""
    text = summary.strip()
    candidates = [text]
    if "\n" in text:
        candidates.append(text.split("\n", 1)[1].strip())
    for candidate in candidates:
        try:
            return True, json.loads(candidate)
        except ValueError:
            continue
    return False, None


def check(contract: OutputContract, summary: str) -> Checked:
    """Read the result from a `done`'s text and validate it against the schema."""
    found, value = _parsed(summary)
    if not found:
        return Checked(error="no JSON result after `done`: end with `done SUMMARY <<EOF`, "
                             "the JSON, then `EOF`")
    problem = mismatch(contract.schema, value, "the result")
    if problem is None:
        return Checked(value=value)
    return Checked(error=f"the result does not match the schema: {problem}")


def _unbounded(schema: dict[str, Any]) -> str | None:
    """Why `schema` is too big, too deep or refers outside itself (None: it is not)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            return f"more than {MAX_SCHEMA_NODES:,} values (too large to check quickly)"
        if depth > MAX_SCHEMA_DEPTH:
            return f"nested more than {MAX_SCHEMA_DEPTH} deep"
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _REF_KEYS and isinstance(value, str) and not value.startswith("#"):
                    return (f"{key} {value[:80]!r} refers outside the schema; nothing is "
                            "fetched or read: put it under $defs and refer to #/$defs/…")
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return None


class _SchemaLoopError(Exception):
    """A schema whose `$ref`s loop without end, or point at nothing."""


def _errors(schema: dict[str, Any], value: Any) -> list[Any]:
    """The validation errors of `value`, with a registry that retrieves nothing."""
    import jsonschema
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    validator = jsonschema.validators.validator_for(schema)(schema, registry=Registry())
    try:
        return list(validator.iter_errors(value))
    except RecursionError:
        raise _SchemaLoopError("its $ref refers to itself without end (a loop)") from None
    except Unresolvable as exc:
        raise _SchemaLoopError(f"$ref {exc.ref[:80]!r} points at nothing in the schema"
                               ) from None


def mismatch(schema: dict[str, Any], value: Any, whole: str = "the value") -> str | None:
    """Where and how `value` fails `schema` (`at PATH: message`, PATH `whole` at the top)."""
    from jsonschema.exceptions import best_match

    try:
        problem = best_match(_errors(schema, value))
    except _SchemaLoopError as exc:
        return f"the schema cannot check it: {exc}"
    if problem is None:
        return None
    where = "/".join(str(p) for p in problem.absolute_path) or whole
    return f"at {where}: {problem.message}"
