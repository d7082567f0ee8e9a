"""The `analyze` tool: health numbers, complexity, type checker and linter."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from normalize.errors import ToolError
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools import analyze
from normalize.tools.analyze import AnalyzeTool, function_complexities
from normalize.tools.base import ToolContext

# files.walk builds its specs with pathspec's deprecated "gitwildmatch" name.
pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))
    return root


def write_in(ctx: ToolContext, files: dict[str, str | bytes]) -> ToolContext:
    """Write `files` into the context's workspace; returns the context."""
    write(ctx.workspace, files)
    return ctx


def analyze_run(ctx: ToolContext, *args: str) -> ActionResult:
    return AnalyzeTool().run(Action("analyze", {"args": list(args)}), ctx)


COMPLEX_SOURCE = '''
def simple():
    return 1

def branches(x):
    if x > 0:
        return 1
    elif x < 0:
        return -1
    else:
        return 0

def loops(xs):
    total = 0
    for x in xs:
        while x > 10 and x % 2 or x == 99:
            x -= 1
        total += x if x else 0
    return [y for y in xs if y if y > 1]

async def handlers(path):
    try:
        async with open_it(path) as fh:
            assert fh
    except OSError:
        pass
    except ValueError:
        raise

def matcher(command):
    match command:
        case "go":
            return 1
        case "stop":
            return 2
        case _:
            return 3

class Shape:
    def area(self):
        def helper(n):
            return n if n else 0
        return helper(1) if self else 0
'''

EXPECTED = {
    "simple": 1,
    "branches": 3,  # if, elif
    "loops": 8,  # for, while, `and` + `or` (2), ternary, two comprehension ifs
    "handlers": 5,  # async with, assert, two excepts
    "matcher": 4,  # three cases
    "Shape.area": 2,  # ternary; the nested helper counts on its own
    "Shape.area.helper": 2,
}


def test_complexity_of_known_functions() -> None:
    found = function_complexities(ast.parse(COMPLEX_SOURCE), "mod.py")
    assert {f.name: f.complexity for f in found} == EXPECTED
    assert [f.line for f in found if f.name == "branches"] == [5]


HEALTH_REPO: dict[str, str | bytes] = {
    ".gitignore": "build/\n*.log\n",
    "app/main.py": """\
        # TODO: split this module
        def run(x):
            if x:
                return 1
            return 0
        """,
    "app/util.py": "def helper():\n    return 2  # FIXME later\n",
    "README.md": "# Demo\n\nSome words.\nHACK: none\n",
    "web/index.js": "console.log('hi')\n",
    "notes": "no extension\nsecond line",  # no trailing newline: still 2 lines
    "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
    "build/gen.py": "ignored = True\n",
    "debug.log": "ignored\n",
}


def test_health_counts_exactly(tool_ctx: ToolContext) -> None:
    result = analyze_run(write_in(tool_ctx, HEALTH_REPO))
    assert result.ok
    health = result.data["health"]
    assert health["files"] == 6  # .gitignore, 2 Python, README, JS, notes
    assert health["lines"] == 2 + 5 + 2 + 4 + 1 + 2
    assert health["binaries_skipped"] == 1
    assert health["languages"] == {
        "Python": {"files": 2, "lines": 7},
        "Markdown": {"files": 1, "lines": 4},
        "Other": {"files": 2, "lines": 4},
        "JavaScript": {"files": 1, "lines": 1},
    }
    assert health["largest"][0] == {"path": "app/main.py", "lines": 5, "bytes": 78}
    assert [f["name"] for f in health["most_complex"]] == ["run", "helper"]
    assert health["most_complex"][0] == {
        "path": "app/main.py", "line": 2, "name": "run", "complexity": 2,
    }
    assert health["todos"] == {
        "count": 3,
        "by_kind": {"FIXME": 1, "HACK": 1, "TODO": 1},
        "first": [
            "README.md:4: HACK: none",
            "app/main.py:1: # TODO: split this module",
            "app/util.py:2: return 2  # FIXME later",
        ],
    }
    assert "app/main.py:2 run 2" in result.output
    assert result.output.splitlines()[0] == "6 files, 16 lines in ."
    summary = result.output.splitlines()[-1]
    assert summary.startswith(
        "summary: . holds 6 files with 16 lines, mostly Python (43% of lines)."
    )


def test_health_of_a_subdirectory(tool_ctx: ToolContext) -> None:
    result = analyze_run(write_in(tool_ctx, HEALTH_REPO), "app", "--health")
    assert result.data["health"]["files"] == 2
    assert result.output.startswith("2 files, 7 lines in app")


def test_health_skips_unparsable_python(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"bad.py": "def broken(:\n", "ok.py": "def fine():\n    pass\n"})
    result = analyze_run(tool_ctx)
    assert result.data["health"]["unparsed"] == ["bad.py"]
    assert result.data["health"]["functions"] == 1


def test_complexity_lists_functions_above_the_threshold(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"mod.py": COMPLEX_SOURCE, "doc.md": "TODO\n"})
    result = analyze_run(tool_ctx, "--complexity", "--threshold", "3")
    assert result.ok
    assert result.data == {"complexity": {
        "threshold": 3,
        "checked": 7,
        "above": [
            {"path": "mod.py", "line": 13, "name": "loops", "complexity": 8},
            {"path": "mod.py", "line": 21, "name": "handlers", "complexity": 5},
            {"path": "mod.py", "line": 30, "name": "matcher", "complexity": 4},
        ],
    }}
    assert result.output.splitlines()[1] == "  mod.py:13 loops 8"
    quiet = analyze_run(tool_ctx, "--complexity")
    assert quiet.output == "no function has a complexity above 10 (7 checked)"


def test_types_finds_a_planted_error_with_mypy(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n\n"
                                  "add(1, 'two')\n"})
    result = analyze_run(tool_ctx, "--types")
    assert result.status is ResultStatus.ERROR
    assert result.error == "mypy: 1 error"
    assert result.data["types"] == {"tool": "mypy", "installed": True, "errors": 1}
    assert "calc.py:4: error" in result.output


def test_types_on_clean_code_succeed(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n"})
    result = analyze_run(tool_ctx, "calc.py", "--types")
    assert result.ok, result.output
    assert result.data["types"]["errors"] == 0


def test_lint_runs_ruff(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"mod.py": "import os\n\nx = 1\n"})
    result = analyze_run(tool_ctx, "--lint")
    assert result.status is ResultStatus.ERROR
    assert result.data["lint"]["tool"] == "ruff"
    assert result.data["lint"]["errors"] >= 1
    assert "mod.py:1:8: F401" in result.output


def test_missing_checkers_are_a_clear_success(
    tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analyze, "_has_module", lambda name: False)
    monkeypatch.setattr("shutil.which", lambda name: None)
    result = analyze_run(write_in(tool_ctx, {"a.py": "x = 1\n"}), "--types", "--lint")
    assert result.ok
    assert "no type checker installed: install mypy" in result.output
    assert "no linter installed: install ruff" in result.output
    assert result.data == {
        "types": {"tool": None, "installed": False, "errors": None},
        "lint": {"tool": None, "installed": False, "errors": None},
    }


def test_several_modes_make_sections(tool_ctx: ToolContext) -> None:
    result = analyze_run(write_in(tool_ctx, {"a.py": "x = 1\n"}), "--health", "--complexity")
    assert result.output.startswith("== health ==\n")
    assert "\n\n== complexity ==\n" in result.output


@pytest.mark.parametrize("args", [["--fast"], ["a", "b"], ["--threshold", "x"], ["missing"]])
def test_bad_arguments(tool_ctx: ToolContext, args: list[str]) -> None:
    with pytest.raises(ToolError):
        analyze_run(tool_ctx, *args)
