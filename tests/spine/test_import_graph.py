"""The import graph is pinned: every module imports only the layers its own layer may use.

An `ast` walk reads each `import` and `from ... import` of every module under
`normalize/`, at any depth: module level, inside functions (where an import
that dodges a cycle hides), and under `if TYPE_CHECKING:`. Type-only imports
never run, but they tie the layers together all the same, so they count too.
Each module belongs to one layer of `LAYERS`; a module no layer claims fails
by name, so a new file is placed on purpose. `ALLOWED` mirrors the table
"The allowed imports" of the architecture notes (docs/architecture.md).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import normalize

PACKAGE = Path(normalize.__file__).resolve().parent

# module (or package: its submodules too) -> layer; the longest match wins
LAYERS: dict[str, str] = {
    "normalize.cli": "cli",
    "normalize": "api",  # the package itself only (its __init__: the public API)
    "normalize.runner": "api",
    # sub-tasks: the spawner makes, runs and collects them (store, checkpoints, executor);
    # attempts is best-of-N over it; fork a new task from another's state; copies the sweep
    "normalize.subtasks": "api",
    "normalize.subtasks.children": "core",  # the records and the seam the spawn tool sees
    "normalize.batch": "api",  # a workflow over many items: sub-tasks, the executor, the store
    "normalize.drivers": "drivers",
    "normalize.contract": "contract",  # the Driver protocol, RunContext, the registry
    "normalize.workflow": "workflow",
    "normalize.engine": "engine",
    "normalize.recovery": "engine",
    "normalize.execution": "execution",
    "normalize.tools": "tools",
    "normalize.providers": "providers",
    "normalize.prompts": "providers",
    "normalize.testing": "testing",
    "normalize.store": "store",
    **{f"normalize.{name}": "core" for name in (
        "task", "events", "errors", "intents", "verbs", "redact", "cancel", "faults",
        "fsutil", "plugins", "sandbox", "retry", "fsopen", "programs", "serial",
        "structured", "hooks", "homes", "telemetry", "keys", "tables", "statuses",
        "artefacts")},
    "normalize.checkpoints": "store",
    "normalize.memory": "store",  # memory entries, their SQLite store, consolidation rules
    "normalize.memory.settings": "core",  # the memory keys workflows and the config declare
    "normalize.skills": "core",  # Agent Skills: SKILL.md read and checked, the catalog
    "normalize.permissions": "api",  # resolves the layers: user config, workflow, flags
    "normalize.mcp": "core",  # the MCP client: server tables, sessions, the sandboxed transport
    "normalize.mcp_server": "api",  # `normalize mcp`: serves the tools and the tasks
    "normalize.acp": "api",  # `normalize acp`: sessions that are tasks, over ACP
}

CORE = {"core"}
# layer -> the other layers it may import (its own is always allowed)
ALLOWED: dict[str, set[str]] = {
    "cli": {"api", "drivers", "contract", "workflow", "engine", "execution", "tools",
            "providers", "testing", "store", *CORE},
    "api": {"drivers", "contract", "workflow", "engine", "execution", "tools", "providers",
            "store", *CORE},
    "drivers": {"contract", "workflow", "execution", "providers", *CORE},
    "contract": CORE,
    "workflow": {"contract", "tools", "providers", "execution", *CORE},
    "engine": {"contract", "tools", "store", "execution", *CORE},
    "execution": CORE,
    "tools": {"execution", *CORE},
    "providers": CORE,
    "testing": {"providers", *CORE},
    "store": CORE,
    "core": CORE,
}

# (importing module or package, imported module): why this one crossing is allowed.
# Empty: a crossing the table does not allow is a design question, not a list entry.
EXCEPTIONS: dict[tuple[str, str], str] = {}


# loops of modules that import each other (through any others), allowed by name
CYCLES: dict[frozenset[str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    if module == "normalize":
        return LAYERS["normalize"]
    prefixes = [p for p in LAYERS if p != "normalize" and
                (module == p or module.startswith(p + "."))]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


@dataclass(frozen=True)
class Import:
    """One import of a normalize module: where it is written and what it loads."""

    module: str
    line: int
    target: str


def imports_in(module: str, source: str, known: set[str], *,
               is_package: bool = False) -> Iterator[Import]:
    """Every import of a `normalize` module in `source`, at any depth."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "normalize" or alias.name.startswith("normalize."):
                    yield Import(module, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base != "normalize" and not base.startswith("normalize."):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield Import(module, node.lineno, submodule if submodule in known else base)


@cache
def all_imports() -> list[Import]:
    modules = package_modules()
    known = set(modules)
    found: list[Import] = []
    for name, path in modules.items():
        found += imports_in(name, path.read_text(encoding="utf-8"), known,
                            is_package=path.name == "__init__.py")
    return sorted(set(found), key=lambda i: (i.module, i.line, i.target))


def excepted(imp: Import) -> tuple[str, str] | None:
    """The entry of EXCEPTIONS that allows `imp`, if one does."""
    for importer, target in EXCEPTIONS:
        if imp.target == target and (imp.module == importer or
                                     imp.module.startswith(importer + ".")):
            return importer, target
    return None


def forbidden(imports: list[Import]) -> list[str]:
    """One line per import that crosses the table: the file, line and forbidden target."""
    lines = []
    for imp in imports:
        source, target = layer_of(imp.module), layer_of(imp.target)
        if source is None:  # named by test_every_module_belongs_to_a_layer
            continue
        if target == source or excepted(imp):
            continue
        if target is None or target not in ALLOWED[source]:
            path = package_modules()[imp.module].relative_to(PACKAGE.parent)
            may = ", ".join(sorted(ALLOWED[source])) or "nothing else"
            lines.append(f"{path}:{imp.line}: {imp.module} ({source}) imports {imp.target} "
                         f"({target or 'no layer'}); {source} may import only: {may}")
    return lines


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = [m for m in package_modules() if layer_of(m) is None]
    assert not unplaced, ("modules in no layer (add them to LAYERS in "
                          f"tests/spine/test_import_graph.py): {', '.join(unplaced)}")


def test_every_import_points_down_the_table() -> None:
    problems = forbidden(all_imports())
    assert not problems, "imports that break the layers:\n" + "\n".join(problems)


def test_every_exception_is_still_taken() -> None:
    taken = {excepted(imp) for imp in all_imports()}
    stale = [f"{a} -> {b}" for a, b in EXCEPTIONS if (a, b) not in taken]
    assert not stale, f"exceptions no import needs any more (delete them): {', '.join(stale)}"


def cycles(imports: list[Import]) -> list[frozenset[str]]:
    """The loops of the module graph: its strongly connected parts of two modules or more."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.module:
            graph.setdefault(imp.module, set()).add(imp.target)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            part = {stack.pop()}
            while node not in part:
                part.add(stack.pop())
            if len(part) > 1:
                found.append(frozenset(part))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_no_modules_import_each_other() -> None:
    """Within a layer too: a loop of modules (cli/agent.py <-> cli/commands.py, say) fails."""
    imports = all_imports()
    loops = [part for part in cycles(imports) if part not in CYCLES]
    described = ["; ".join(f"{i.module}:{i.line} -> {i.target}" for i in imports
                           if i.module in part and i.target in part) for part in loops]
    assert not loops, "modules that import each other:\n" + "\n".join(described)
    stale = [" <-> ".join(sorted(part)) for part in CYCLES if part not in cycles(imports)]
    assert not stale, f"allowed loops that are gone (delete them): {', '.join(stale)}"


def test_the_table_has_no_cycle() -> None:
    """Whatever the modules do, the rules themselves allow no loop between layers."""
    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt}))
                   for nxt in ALLOWED[start] - {start})

    assert set(LAYERS.values()) == set(ALLOWED)
    assert [layer for layer in ALLOWED if reaches(layer, layer)] == []


def test_the_walk_sees_every_kind_of_import() -> None:
    """Function-level, type-only and relative imports are all read (the test can fail)."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import normalize.task\n"
        "if TYPE_CHECKING:\n"
        "    from normalize.runner import RunOptions\n"
        "def run() -> None:\n"
        "    from normalize.workflow import loader\n"
        "    from ..engine import Engine\n"
        "    from . import cache\n"
    )
    known = {"normalize.workflow.loader", "normalize.execution.cache"}
    found = {(i.line, i.target) for i in imports_in("normalize.execution.scope", source, known)}
    assert found == {(3, "normalize.task"), (5, "normalize.runner"),
                     (7, "normalize.workflow.loader"), (8, "normalize.engine"),
                     (9, "normalize.execution.cache")}
    problems = forbidden([Import("normalize.execution.scope", 5, "normalize.runner"),
                          Import("normalize.execution.scope", 3, "normalize.task")])
    assert problems == [
        "normalize/execution/scope.py:5: normalize.execution.scope (execution) imports "
        "normalize.runner (api); execution may import only: core"]
