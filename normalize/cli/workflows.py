"""`normalize workflows list|show|validate` and `normalize plugins`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cli.console import Environment, fail
from normalize.errors import ConfigError, ExitStatus, NormalizeError

if TYPE_CHECKING:
    from normalize.workflow.spec import StepSpec, WorkflowSpec


def _load(path: Path, variables: dict[str, str] | None = None) -> WorkflowSpec:
    from normalize.workflow.loader import load_workflow

    return load_workflow(path, overrides=variables)


def list_workflows(env: Environment, *, workspace: Path | None, json_output: bool) -> int:
    """Every workflow found: the project's, the user's, the built-ins (first one wins)."""
    from normalize.permissions import is_trusted
    from normalize.workflow.catalog import builtin_dir, locate_workflow
    from normalize.workflow.catalog import list_workflows as find_all

    root = (workspace or Path.cwd()).resolve()
    rows: list[dict[str, Any]] = []
    for entry in find_all(root):
        used = locate_workflow(entry.name, root, is_trusted)  # what a run of the name takes
        if used.shadowed is not None:  # an untrusted project file passed over: said so
            rows.append(_row(entry.name, "project", used.shadowed, "shadowed"))
            origin = "builtin" if used.path.parent == builtin_dir() else used.origin
            rows.append(_row(entry.name, origin, used.path, "trusted"))
        else:
            rows.append(_row(entry.name, entry.origin, entry.path,
                             "untrusted" if used.origin == "workspace" else "trusted"))
    if json_output:
        for row in rows:
            env.stdout.write(json.dumps(row) + "\n")
        return 0
    if not rows:
        env.stdout.write("no workflows found\n")
        return 0
    width = max(len(r["name"]) for r in rows)
    env.stdout.write(f"{'NAME':<{width}}  {'ORIGIN':<8} {'DRIVER':<14} DESCRIPTION\n")
    for row in rows:
        what = row["description"] if row["error"] is None else \
            "invalid: run `normalize workflows validate " + row["path"] + "`"
        what = TRUST_NOTES[row["trust"]].format(path=row["path"], what=what)
        env.stdout.write(f"{row['name']:<{width}}  {row['origin']:<8} "
                         f"{row['driver'] or '-':<14} {what}\n")
    return 0


TRUST_NOTES = {
    "trusted": "{what}",
    "untrusted": "{what} (untrusted: may only narrow permissions; normalize trust {path})",
    "shadowed": "not used, untrusted: the one below runs instead (normalize trust {path})",
}


def _row(name: str, origin: str, path: Path, trust: str) -> dict[str, Any]:
    """One workflow as `workflows list` shows it; `trust` is trusted, untrusted or shadowed."""
    row: dict[str, Any] = {"name": name, "origin": origin, "path": str(path), "driver": None,
                           "description": "", "error": None, "trust": trust,
                           "used": trust != "shadowed"}
    try:
        spec = _load(path)
        row["driver"], row["description"] = spec.driver, spec.description
    except NormalizeError as exc:
        row["error"] = str(exc)
    return row


def show_workflow(env: Environment, ref: str, pairs: list[str], *, workspace: Path | None,
                  json_output: bool) -> int:
    """The resolved spec of a workflow found by name or path."""
    from normalize.runner import parse_vars
    from normalize.workflow.catalog import find_workflow
    from normalize.workflow.plan import describe

    try:
        root = (workspace or Path.cwd()).resolve()
        path = find_workflow(ref, root)
        spec = _load(path, parse_vars(pairs))
    except NormalizeError as exc:
        return fail(env, exc)
    if json_output:
        env.stdout.write(json.dumps(spec.to_dict()) + "\n")  # one line, like every --json
        return 0
    for line in describe(spec, workspace=root):
        env.stdout.write(line + "\n")
    return 0


def validate_workflows(env: Environment, refs: list[str], *, workspace: Path | None,
                       json_output: bool) -> int:
    """Each file `ok` or its `FILE:LINE:COL: message`; exit 2 when any fails."""
    from normalize.workflow.catalog import find_workflow

    root = (workspace or Path.cwd()).resolve()
    failures = 0
    for ref in refs:
        try:
            path = find_workflow(ref, root)
            spec = _load(path)
        except NormalizeError as exc:
            failures += 1
            message = str(exc)
            if not isinstance(exc, ConfigError) or exc.file is None:
                message = message if message.startswith(ref) else f"{ref}: {message}"
            more = [str(o) for o in exc.others] if isinstance(exc, ConfigError) else []
            if json_output:
                env.stdout.write(json.dumps({"file": ref, "ok": False, "error": message,
                                             "errors": [message, *more]}) + "\n")
            else:
                env.stderr.write("".join(f"{line}\n" for line in [message, *more]))
            continue
        size = (f"{_count_steps(spec.steps)} steps" if spec.steps else
                f"{len(spec.states)} states" if spec.states else "a model loop")
        if json_output:
            env.stdout.write(json.dumps({"file": str(path), "ok": True, "driver": spec.driver,
                                         "name": spec.name}) + "\n")
        else:
            env.stdout.write(f"{path}: ok ({spec.driver}, {size})\n")
    return int(ExitStatus.USAGE) if failures else 0


def _count_steps(steps: Sequence[StepSpec]) -> int:
    return sum(1 + _count_steps(s.steps) + _count_steps(s.otherwise) for s in steps)


# -- plugins -------------------------------------------------------------------


@dataclass(frozen=True)
class PluginRow:
    group: str
    name: str
    origin: str
    target: str


def _target(obj: object) -> str:
    module = getattr(obj, "__module__", "") or ""
    name = getattr(obj, "__qualname__", "") or type(obj).__qualname__
    return f"{module}:{name}"


def _origin(obj: object) -> str:
    module = getattr(obj, "__module__", "") or type(obj).__module__
    return "builtin" if module.startswith("normalize.") else "runtime"


BUILT_IN_WORDS = {
    "conditions": dict.fromkeys(
        ("success", "failure", "always", "contains", "not_contains", "matches", "exit_code",
         "var", "visits"), "normalize.workflow.conditions:evaluate",
    ) | {"llm": "normalize.drivers.choose:choose_next"},
    "sources": {"files": "normalize.workflow.sources:glob_files",
                "lines": "normalize.workflow.sources:resolve_items"},
    "steps": {"for-each": "key for_each (normalize.drivers.workflow)",
              "fanout": "key parallel (normalize.drivers.workflow)",
              "condition": "key condition (normalize.workflow.conditions)",
              "capture": "key capture (normalize.drivers.workflow)",
              "transform": "key transform (normalize.drivers.step_actions:apply_transform)",
              "workflow": "key workflow (normalize.workflow.delegate)"},
}
"""What the language itself knows: words and step keys, listed beside the plugins."""


def plugin_rows() -> tuple[list[PluginRow], list[str]]:
    """Everything registered, and the warnings of plugins that failed to load."""
    from normalize.contract.driver import DRIVERS
    from normalize.memory import MEMORY_STORES
    from normalize.plugins import PluginGroup
    from normalize.workflow.conditions import CONDITIONS
    from normalize.workflow.sources import SOURCES
    from normalize.workflow.steps import STEPS

    rows: list[PluginRow] = []
    warnings: list[str] = []
    groups: list[PluginGroup[Any]] = [DRIVERS, STEPS, CONDITIONS, SOURCES, MEMORY_STORES]
    for group in groups:
        group.load_all()
        short = group.group.removeprefix("normalize.")
        rows += [PluginRow(short, i.name, i.origin, i.target) for i in group.infos()]
        warnings += group.warnings
        for name, target in BUILT_IN_WORDS.get(short, {}).items():
            rows.append(PluginRow(short, name, "builtin", target))
    from normalize.providers.registry import PROVIDERS

    rows += [PluginRow("providers", name, _origin(f), _target(f))
             for name, f in sorted(PROVIDERS.items())]
    try:
        from normalize.execution.context import CONTEXTS
    except ImportError as exc:  # the context strategies are optional to list
        warnings.append(f"contexts: cannot list: {exc}")
    else:
        rows += [PluginRow("contexts", name, _origin(f), _target(f))
                 for name, f in sorted(CONTEXTS.items())]
    from normalize.tools import default_tools

    registry = default_tools()
    for name in registry.names():
        tool = registry.get(name)
        rows.append(PluginRow("tools", name, _origin(tool), _target(type(tool))))
    return rows, warnings


def list_plugins(env: Environment, *, json_output: bool) -> int:
    """`normalize plugins`: group, name, origin and target of everything registered."""
    rows, warnings = plugin_rows()
    if json_output:
        for row in rows:
            env.stdout.write(json.dumps(row.__dict__) + "\n")
    else:
        widths = [max(len(getattr(r, k)) for r in rows) for k in ("group", "name", "origin")]
        head = ("GROUP", "NAME", "ORIGIN")
        env.stdout.write("  ".join(f"{h:<{w}}" for h, w in zip(head, widths, strict=True))
                         + "  TARGET\n")
        for row in rows:
            cells = (row.group, row.name, row.origin)
            env.stdout.write("  ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))
                             + f"  {row.target}\n")
    for warning in warnings:
        env.stderr.write(f"normalize: warning: {warning}\n")
    return 0
