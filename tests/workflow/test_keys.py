"""The `[workflow]` sub-tables: each key declared once; the loader and the README follow.

A wrong type, a broken rule or an unknown key is found from the declarations
alone (`normalize.tables`), at its line; a file's tables become typed values
and are stored as the keys the file set; the README's table is the one the
declarations generate.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest
from helpers import REPO

from normalize.errors import ConfigError
from normalize.keys import STR, declared, parse_table
from normalize.tables import WORKFLOW_TABLES, CacheSettings, ContextSettings, LLMTable
from normalize.task import Limits
from normalize.workflow.loader import load_workflow_text
from normalize.workflow.spec import WorkflowSpec

STEPS = '[[workflow.steps]]\naction = "view a.py"\n'
KEYS = [(name, key) for name, cls in WORKFLOW_TABLES.items() for key in declared(cls)]


def flow(table: str, body: str) -> str:
    return f'[workflow]\nname = "keys"\n\n[workflow.{table}]\n{body}\n\n{STEPS}'


def load(text: str) -> WorkflowSpec:
    return load_workflow_text(text, label="keys.toml")


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text)
    return str(caught.value)


@pytest.mark.parametrize(("table", "key"), KEYS, ids=[f"{t}.{k}" for t, k in KEYS])
def test_every_declared_key_is_checked_for_its_type_at_its_line(table: str, key: str) -> None:
    kind = declared(WORKFLOW_TABLES[table])[key].kind
    wrong, said = ("5", "a number") if kind is STR else ('"text"', "a string")
    assert refusal(flow(table, f"{key} = {wrong}")) == \
        f"keys.toml:5:1: {key!r} must be {kind.name}, not {said}"


def test_rules_and_unknown_keys_come_from_the_declarations() -> None:
    assert refusal(flow("context", "repo_map = -1")) == \
        "keys.toml:5:1: 'repo_map' must be from 0 to 16384, not -1"
    assert refusal(flow("llm", "max_tokens = 0")) == \
        "keys.toml:5:1: 'max_tokens' must be at least 1, not 0"
    assert refusal(flow("retry", "base_delay = -1")) == \
        "keys.toml:5:1: 'base_delay' must not be negative"
    assert refusal(flow("cache", "max_byte = 5")) == \
        "keys.toml:5:1: unknown key 'max_byte' in [workflow.cache]; did you mean 'max_bytes'?"
    assert refusal(flow("permissions", 'network = ["https://pypi.org"]')).startswith(
        "keys.toml:5:1: network 'https://pypi.org' is not a host name")
    assert refusal(flow("limits", "driver = \"llm\"")) == \
        "keys.toml:5:1: unknown key 'driver' in [workflow.limits]"


def test_a_rule_is_checked_because_it_is_declared() -> None:
    """The same table, its rule taken out of the declaration: the value passes."""
    loose = dataclasses.make_dataclass(
        "Loose", [("max_results", int | None, dataclasses.field(
            default=None, metadata={"normalize.key": dataclasses.replace(
                declared(ContextSettings)["max_results"], rule=None)}))], frozen=True)
    with pytest.raises(ConfigError, match="must be at least 1, not 0"):
        parse_table(ContextSettings, {"max_results": 0}, "workflow.context")
    assert parse_table(loose, {"max_results": 0}, "workflow.context").max_results == 0


def test_tables_are_typed_and_stored_as_the_file_set_them() -> None:
    spec = load('[workflow]\nname = "keys"\ncontext = "flat"\n'
                '[workflow.cache]\nstrategy = "memory"\nttl_seconds = 5\n'
                '[workflow.limits]\nmax_turns = 3\n'
                '[workflow.llm]\nprovider = "scripted"\nfallback = ["a", "b"]\n' + STEPS)
    assert spec.context == ContextSettings(strategy="flat")
    assert spec.cache == CacheSettings(strategy="memory", ttl_seconds=5)
    assert spec.limits == Limits(max_turns=3)
    assert spec.llm == LLMTable(provider="scripted", fallback=("a", "b"))
    stored = spec.to_dict()
    assert stored["context"] == {"strategy": "flat"}
    assert stored["cache"] == {"strategy": "memory", "ttl_seconds": 5}
    assert stored["llm"] == {"provider": "scripted", "fallback": ["a", "b"]}
    again = WorkflowSpec.from_dict(stored)
    assert (again.context, again.cache, again.limits, again.llm) == \
        (spec.context, spec.cache, spec.limits, spec.llm)


def test_a_spec_stored_before_the_tables_were_typed_reads_back() -> None:
    old: dict[str, Any] = {
        "name": "old", "path": "old.toml", "driver": "llm", "context": {"strategy": "flat"},
        "cache": {}, "retry": {"strategy": "fixed", "max_attempts": 2}, "limits": {},
        "llm": {"provider": "scripted", "model": "x", "fallback": []},
        "permissions": {"mode": "ask", "network": ["pypi.org"]}, "steps": [], "states": []}
    spec = WorkflowSpec.from_dict(old)
    assert spec.retry.max_attempts == 2 and spec.limits == Limits()
    assert spec.llm == LLMTable(provider="scripted", model="x")
    assert spec.permissions.network == ["pypi.org"] and spec.permissions.mode == "ask"


def test_the_readme_table_is_the_one_the_declarations_generate() -> None:
    script = REPO / "scripts" / "gen_workflow_keys.py"
    done = subprocess.run([sys.executable, str(script), "--check"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(script.parent))
    try:
        import gen_workflow_keys
    finally:
        sys.path.remove(str(script.parent))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    stale = readme.replace("| `[workflow.llm]` | `thinking` |", "| `[workflow.llm]` | `think` |")
    assert stale != readme and gen_workflow_keys.rendered(stale) == readme
    for table, key in KEYS:
        assert f"| `[workflow.{table}]` | `{key}` |" in readme


def test_every_declared_key_has_a_line_of_docs() -> None:
    for table, key in KEYS:
        assert declared(WORKFLOW_TABLES[table])[key].doc.strip(), f"{table}.{key}"
