"""Structured results: a JSON Schema the model's final answer must meet (`--output-schema`).

The model ends with `done SUMMARY <<EOF`, the JSON value, `EOF` (or `done`
followed by the JSON on one line). The value is checked with `jsonschema`
(imported on first use); an invalid one goes back to the model with the
validator's message, at most `retries` times, then the task fails with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.errors import UsageError
from normalize.serial import Record

__all__ = ["DEFAULT_RETRIES", "MAX_RETRIES", "Checked", "OutputContract", "check",
           "load_contract", "mismatch"]

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


def load_contract(path: Path, retries: int = DEFAULT_RETRIES, *,
                  flag: str = "--output-schema") -> OutputContract:
    """Read and check a schema file; a bad one is one line naming it."""
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{flag} {path}: not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise UsageError(f"{flag} {path}: a JSON Schema is an object")
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise UsageError(f"{flag} {path}: not a valid JSON Schema: {exc.message}") from None
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


def mismatch(schema: dict[str, Any], value: Any, whole: str = "the value") -> str | None:
    """Where and how `value` fails `schema` (`at PATH: message`, PATH `whole` at the top)."""
    import jsonschema
    from jsonschema.exceptions import best_match

    validator = jsonschema.validators.validator_for(schema)(schema)
    problem = best_match(validator.iter_errors(value))
    if problem is None:
        return None
    where = "/".join(str(p) for p in problem.absolute_path) or whole
    return f"at {where}: {problem.message}"
