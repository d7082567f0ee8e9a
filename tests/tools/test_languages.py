"""The eight added languages: outline, `view PATH/Symbol` and `edit PATH/SYMBOL` on each."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.code import find_symbol, language_for, outline, supported_languages
from normalize.tools.edit import EditTool
from normalize.tools.view import ViewTool

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"
RunTool = Callable[..., ActionResult]

# (file, language, symbol spec, its lines with the doc comment, (name, kind) pairs it holds)
CASES = [
    ("lang/sample.rb", "ruby", "Shop/Inventory/add", (14, 18),
     {("Shop", "module"), ("Inventory", "class"), ("initialize", "method"), ("empty", "method"),
      ("helper", "function"), ("MAX_ITEMS", "constant")}),
    ("lang/sample.cs", "csharp", "Bank/Account/Deposit", (12, 16),
     {("Bank", "namespace"), ("Account", "class"), ("Account", "constructor"),
      ("IAccount", "interface"), ("Kind", "enum"), ("Point", "struct"), ("Limit", "property")}),
    ("lang/sample.php", "php", "User/name", (13, 17),
     {("User", "class"), ("__construct", "method"), ("find", "method"), ("Named", "interface"),
      ("Greets", "trait"), ("helper", "function")}),
    ("lang/sample.sh", "bash", "usage", (4, 8),
     {("usage", "function"), ("build", "function"), ("main", "function")}),
    ("lang/sample.kt", "kotlin", "Inventory/add", (7, 10),
     {("Inventory", "class"), ("Named", "interface"), ("Registry", "object"),
      ("Companion", "object"), ("empty", "method"), ("Kind", "enum"), ("helper", "function")}),
    ("lang/sample.swift", "swift", "Inventory/add", (11, 14),
     {("Inventory", "class"), ("init", "constructor"), ("Point", "struct"), ("Named", "interface"),
      ("Kind", "enum"), ("Point", "extension"), ("helper", "function")}),
    ("lang/sample.scala", "scala", "Inventory/add", (7, 10),
     {("Inventory", "class"), ("Inventory", "object"), ("Named", "trait"), ("Point", "class"),
      ("helper", "function")}),
    ("lang/sample.lua", "lua", "M/new", (4, 7),
     {("new", "method"), ("add", "method"), ("helper", "function"), ("double", "method"),
      ("global_fn", "function")}),
    ("real/expo_TypeConverter.kt", "kotlin", "NullAwareTypeConverter/convertNonOptional",
     (52, 56), {("TypeConverter", "class"), ("convert", "method"), ("isTrivial", "method"),
                ("createTrivialTypeConverter", "function")}),
    ("real/expo_ClassComponentBuilder.swift", "swift", "ClassDefinitionBuilder/buildBlock",
     (8, 10), {("ClassDefinitionBuilder", "struct"), ("buildExpression", "method")}),
]  # fmt: skip
IDS = [case[0] for case in CASES]


def test_sixteen_languages() -> None:
    added = {"ruby", "csharp", "php", "bash", "kotlin", "swift", "scala", "lua"}
    assert added <= set(supported_languages())
    assert len(set(supported_languages()) - {"tsx"}) == 16
    assert [language_for(f"x{ext}") for ext in (".rb", ".cs", ".php", ".sh", ".kt", ".swift",
                                                  ".scala", ".lua")] == [
        "ruby", "csharp", "php", "bash", "kotlin", "swift", "scala", "lua"]  # fmt: skip


@pytest.mark.parametrize(("name", "language", "spec", "span", "expected"), CASES, ids=IDS)
def test_outline(
    name: str, language: str, spec: str, span: tuple[int, int], expected: set[tuple[str, str]]
) -> None:
    path = FIXTURES / name
    assert language_for(path) == language
    symbols = outline(path, path.read_text(encoding="utf-8"))
    assert symbols is not None
    found = {(s.name, s.kind) for top in symbols for s in top.walk()}
    assert expected <= found, expected - found
    symbol = find_symbol(symbols, spec)
    assert symbol is not None
    assert (symbol.first_line, symbol.end_line) == span


@pytest.mark.parametrize(("name", "language", "spec", "span", "expected"), CASES, ids=IDS)
def test_view_and_edit_a_symbol(
    tool_ctx: ToolContext, run_tool: RunTool, name: str, language: str, spec: str,
    span: tuple[int, int], expected: set[tuple[str, str]],
) -> None:  # fmt: skip
    del language, expected
    file = Path(name).name
    shutil.copy(FIXTURES / name, tool_ctx.workspace / file)
    source = (tool_ctx.workspace / file).read_text(encoding="utf-8").splitlines()
    shown = run_tool(ViewTool(), f"{file}/{spec}")
    assert shown.ok, shown.error
    assert (shown.data["start"], shown.data["end"]) == span
    text = [line.split("│", 1)[1][1:] for line in shown.output.splitlines() if "│" in line]
    assert text == source[span[0] - 1 : span[1]]
    action = Action("edit", {"args": [f"{file}/{spec}"], "body": "REPLACED\n"}, text="edit")
    done = ToolRegistry([EditTool()]).execute(action, tool_ctx)
    assert done.ok, done.error
    after = (tool_ctx.workspace / file).read_text(encoding="utf-8").splitlines()
    indent = source[span[0] - 1][: len(source[span[0] - 1]) - len(source[span[0] - 1].lstrip())]
    assert after == [*source[: span[0] - 1], f"{indent}REPLACED", *source[span[1] :]]
