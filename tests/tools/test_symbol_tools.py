"""`view PATH/SYMBOL` and `edit PATH/SYMBOL` when a name is ambiguous, and with doc comments."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.edit import EditTool
from normalize.tools.view import ViewTool

CODE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"
RunTool = Callable[..., ActionResult]

OVERLOADED_JAVA = """\
public class Calc {
    /** Adds two ints. */
    public int add(int a, int b) {
        return a + b;
    }

    /** Adds two doubles. */
    public double add(double a, double b) {
        return a + b;
    }
}
"""


def edit(ctx: ToolContext, target: str, body: str) -> ActionResult:
    params: dict[str, object] = {"args": [target], "body": body}
    return ToolRegistry([EditTool()]).execute(Action("edit", params, text=f"edit {target}"), ctx)


def test_view_shows_the_implementation_and_lists_the_overload_stubs(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    shutil.copy(CODE_FIXTURES / "real" / "click_core.py", tool_ctx.workspace / "core.py")
    result = run_tool(ViewTool(), "core.py/Context/lookup_default")
    assert result.ok, result.error
    note, first, *_ = result.output.splitlines()
    assert note == (
        "note: Context/lookup_default has 3 definitions; showing 658-676 (method); the others: "
        "646-650 overload (view core.py/Context/lookup_default@646); "
        "652-656 overload (view core.py/Context/lookup_default@652)"
    )
    assert first.startswith(" 658│     def lookup_default(self, name: str, call: bool = True)")
    assert (result.data["start"], result.data["end"]) == (658, 676)
    assert [o["address"] for o in result.data["others"]] == [
        "lookup_default@646",
        "lookup_default@652",
    ]
    stub = run_tool(ViewTool(), "core.py/Context/lookup_default@646")
    assert stub.ok and not stub.output.startswith("note:")
    assert stub.output.splitlines()[0].startswith(" 646│     @t.overload")


def test_java_overloads_are_listed_and_edit_refuses_the_ambiguous_name(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    path = tool_ctx.workspace / "Calc.java"
    path.write_text(OVERLOADED_JAVA, encoding="utf-8")
    shown = run_tool(ViewTool(), "Calc.java/Calc/add")
    assert shown.output.splitlines()[0].startswith("note: Calc/add has 2 definitions; showing 2-5")
    assert "7-10 method (view Calc.java/Calc/add@8)" in shown.output
    refused = edit(tool_ctx, "Calc.java/Calc/add", "    public int add() { return 0; }\n")
    assert refused.status is ResultStatus.ERROR
    assert refused.error == (
        "'Calc/add' names 2 definitions in Calc.java; pick one: "
        "Calc.java/Calc/add@3 (method, lines 2-5), Calc.java/Calc/add@8 (method, lines 7-10)"
    )
    assert path.read_text(encoding="utf-8") == OVERLOADED_JAVA
    done = edit(tool_ctx, "Calc.java/Calc/add@8", "    /** Sum. */\n    double add() { return 0; }")
    assert done.ok, done.error
    assert path.read_text(encoding="utf-8") == OVERLOADED_JAVA.replace(
        "    /** Adds two doubles. */\n    public double add(double a, double b) {\n"
        "        return a + b;\n    }\n",
        "    /** Sum. */\n    double add() { return 0; }\n",
    )


def test_view_includes_the_doc_comment_and_edit_replaces_it(
    samples: Path, tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    shown = run_tool(ViewTool(), "sample.go/Server/Start")
    assert shown.output.splitlines()[0] == "  23│ // Start begins accepting connections."
    before = (samples / "sample.go").read_text(encoding="utf-8").splitlines()
    body = "func (s *Server) Start(ctx context.Context) error {\n\treturn nil\n}"
    done = edit(tool_ctx, "sample.go/Server/Start", body)
    assert done.ok, done.error
    after = (samples / "sample.go").read_text(encoding="utf-8").splitlines()
    assert after == [*before[:22], *body.splitlines(), *before[30:]]  # lines 23-30 replaced
    assert "// Start begins accepting connections." not in after
