"""The CLI seam is typed: no `Any` in `normalize/cli/` stands for a normalize type.

An `ast` walk reads every annotation of `normalize/cli/` (parameters, returns,
annotated names at any depth). An `Any` is fine as the values of a JSON object
(`dict[str, Any]`, `Mapping[str, Any]`); anywhere else it must be listed in
`FOREIGN` with why the value is not a normalize type. A task, options, a store,
a renderer or an outcome is named by its type (under `TYPE_CHECKING`, so the
command line still starts light).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import normalize

CLI = Path(normalize.__file__).resolve().parent / "cli"

# (file, where: the function or class path, then the parameter or name): why it is Any
FOREIGN: dict[tuple[str, str], str] = {
    ("action.py", "Outcome.result"): "the run's structured result: any JSON value",
    ("agent.py", "_Clients.__call__.**opts"): "a provider's own options, passed through",
    ("batch.py", "_DefaultRun.parse_args.ctx"): "click's Context (typer's vendored click)",
    ("app.py", "usage_error.exc"): "click's UsageError (typer imports click lazily)",
    ("complete.py", "lighten_typer.process_value.self"): "a click.Parameter subclass made lazily",
    ("complete.py", "lighten_typer.process_value.ctx"): "click's Context",
    ("complete.py", "lighten_typer.process_value.value"): "a raw command-line value from click",
    ("complete.py", "lighten_typer.process_value.return"): "whatever click's converter returns",
    ("complete.py", "_plain_str.param"): "a click Parameter",
    ("console.py", "SignalCancel.__init__._previous"): "signal handlers as `signal` gives them",
    ("typeahead.py", "TypeAhead.__init__._saved"): "terminal attributes as `termios` gives them",
    ("workflows.py", "plugin_rows.groups"): "plugin groups of four different plugin types",
}


def _is_json_values(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether this `Any` is the value type of `dict[str, Any]` / `Mapping[str, Any]`."""
    tup = parents.get(node)
    sub = parents.get(tup) if isinstance(tup, ast.Tuple) else None
    if not isinstance(sub, ast.Subscript) or not isinstance(tup, ast.Tuple):
        return False
    base = sub.value.attr if isinstance(sub.value, ast.Attribute) else getattr(
        sub.value, "id", "")
    key = tup.elts[0]
    return base in ("dict", "Mapping", "MutableMapping") and len(tup.elts) == 2 and \
        tup.elts[1] is node and isinstance(key, ast.Name) and key.id == "str"


def _anys(annotation: ast.AST | None) -> int:
    """How many `Any`s in `annotation` are not the values of a JSON object."""
    if annotation is None:
        return 0
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body  # a quoted annotation
    parents = {child: node for node in ast.walk(annotation) for child in ast.iter_child_nodes(node)}
    return sum(1 for node in ast.walk(annotation)
               if isinstance(node, ast.Name) and node.id == "Any"
               and not _is_json_values(node, parents))


def annotated_anys(source: str) -> Iterator[tuple[str, int]]:
    """(where, line) for each annotation in `source` with an `Any` that is not JSON's."""

    def visit(node: ast.AST, scope: list[str]) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, [*scope, child.name])
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                here = [*scope, child.name]
                args = child.args
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                named = [(a.arg, a.annotation) for a in params]
                if args.vararg:
                    named.append((f"*{args.vararg.arg}", args.vararg.annotation))
                if args.kwarg:
                    named.append((f"**{args.kwarg.arg}", args.kwarg.annotation))
                named.append(("return", child.returns))
                for name, annotation in named:
                    if _anys(annotation):
                        yield ".".join([*here, name]), child.lineno
                yield from visit(child, here)
            elif isinstance(child, ast.AnnAssign):
                target = child.target
                name = target.attr if isinstance(target, ast.Attribute) else \
                    getattr(target, "id", "?")
                if _anys(child.annotation):
                    yield ".".join([*scope, name]), child.lineno
            else:
                yield from visit(child, scope)

    yield from visit(ast.parse(source), [])


def found() -> dict[tuple[str, str], int]:
    return {(path.name, where): line for path in sorted(CLI.glob("*.py"))
            for where, line in annotated_anys(path.read_text(encoding="utf-8"))}


def test_no_any_in_the_cli_stands_for_a_normalize_type() -> None:
    unlisted = [f"normalize/cli/{file}:{line}: {where}"
                for (file, where), line in found().items() if (file, where) not in FOREIGN]
    assert not unlisted, ("`Any` where a type belongs (name it, under TYPE_CHECKING; or list "
                          "a truly foreign value in FOREIGN with why):\n" + "\n".join(unlisted))


def test_every_foreign_place_still_has_its_any() -> None:
    stale = [f"{file}: {where}" for file, where in FOREIGN if (file, where) not in found()]
    assert not stale, f"typed now (delete them from FOREIGN): {', '.join(stale)}"


def test_the_walk_tells_json_from_a_type() -> None:
    """The walk can fail: `Any` for a task is found, JSON's values are not."""
    source = ("from typing import Any\n"
              "def show(task: Any, data: dict[str, Any], rows: list[dict[str, Any]],\n"
              "         *args: Any, **kw: Any) -> tuple[Any, int]:\n"
              "    local: Any = None\n"
              "class Seen:\n"
              "    def __init__(self) -> None:\n"
              "        self.renderer: Any = None\n"
              "        self.by_id: dict[int, Any] = {}\n"
              "def quoted(env: 'Any') -> 'dict[str, Any]': ...\n")
    assert [where for where, _ in annotated_anys(source)] == [
        "show.task", "show.*args", "show.**kw", "show.return", "show.local",
        "Seen.__init__.renderer", "Seen.__init__.by_id", "quoted.env"]
