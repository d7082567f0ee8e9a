"""The `test` tool: runner detection, summary parsing, and real pytest runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.test import TestTool, _command, detect_runner, parse_counts, pytest_command


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write_in(ctx: ToolContext, files: dict[str, str]) -> ToolContext:
    """Write `files` into the context's workspace; returns the context."""
    write(ctx.workspace, files)
    return ctx


def run_test(ctx: ToolContext, *args: str) -> ActionResult:
    return TestTool().run(Action("test", {"args": list(args)}), ctx)


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"},
         "pyproject.toml [tool.pytest]"),
        ({"pytest.ini": "[pytest]\n"}, "pytest.ini"),
        ({"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\ntestpaths = t\n"},
         "setup.cfg [tool:pytest]"),
        ({"tox.ini": "[tox]\n[pytest]\naddopts = -q\n"}, "tox.ini [pytest]"),
        ({"tests/test_a.py": ""}, "a tests/ directory with Python files"),
        ({"pkg/test_calc.py": "", "pkg/calc.py": ""}, "test files (pkg/test_calc.py)"),
        ({"pkg/calc_test.py": ""}, "test files (pkg/calc_test.py)"),
    ],
)
def test_pytest_is_detected(tmp_path: Path, files: dict[str, str], reason: str) -> None:
    runner = detect_runner(write(tmp_path, files))
    assert runner is not None
    assert (runner.name, runner.reason, runner.directory) == ("pytest", reason, tmp_path)


def test_npm_is_detected_only_with_a_real_test_script(tmp_path: Path) -> None:
    placeholder = 'echo "Error: no test specified" && exit 1'
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": placeholder}})})
    assert detect_runner(tmp_path) is None
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "jest"}})})
    runner = detect_runner(tmp_path)
    assert runner is not None and runner.name == "npm"
    assert _command(runner, None, ["--ci"]) == ["npm", "test", "--", "--ci"]


def test_cargo_and_go_are_detected(tmp_path: Path) -> None:
    write(tmp_path, {"rust/Cargo.toml": "[package]\nname = 'x'\n", "go/go.mod": "module x\n",
                     "go/pkg/a.go": "package pkg\n"})
    cargo = detect_runner(tmp_path, tmp_path / "rust")
    assert cargo is not None and (cargo.name, cargo.directory) == ("cargo", tmp_path / "rust")
    assert _command(cargo, tmp_path / "rust", []) == ["cargo", "test"]
    go = detect_runner(tmp_path, tmp_path / "go" / "pkg")
    assert go is not None and (go.name, go.directory) == ("go", tmp_path / "go")
    assert _command(go, tmp_path / "go" / "pkg", ["-v"]) == ["go", "test", "./pkg/...", "-v"]
    assert _command(go, None, []) == ["go", "test", "./..."]


def test_configured_pytest_wins_over_package_json(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\n",
                     "package.json": json.dumps({"scripts": {"test": "jest"}})})
    runner = detect_runner(tmp_path)
    assert runner is not None and runner.name == "pytest"


def test_nothing_to_detect(tmp_path: Path) -> None:
    write(tmp_path, {"README.md": "# x\n", "src/app.py": "print(1)\n",
                     "pyproject.toml": "[project]\nname = 'x'\n"})
    assert detect_runner(tmp_path) is None


# files.walk builds its specs with pathspec's deprecated "gitwildmatch" name.
@pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")
def test_ignored_test_files_do_not_count(tmp_path: Path) -> None:
    write(tmp_path, {".gitignore": "build/\n", "build/test_gen.py": ""})
    assert detect_runner(tmp_path) is None


def test_pytest_runs_on_this_interpreter_when_it_can() -> None:
    assert pytest_command() == [sys.executable, "-m", "pytest"]


PASSING_AND_FAILING = {
    "tests/test_calc.py": (
        "def test_adds():\n    assert 1 + 1 == 2\n\n"
        "def test_breaks():\n    assert 1 + 1 == 3\n"
    ),
}


def test_a_pytest_run_reports_counts(tool_ctx: ToolContext) -> None:
    result = run_test(write_in(tool_ctx, PASSING_AND_FAILING))
    assert result.status is ResultStatus.ERROR
    assert result.exit_code == 1
    assert result.data["runner"] == "pytest"
    assert (result.data["passed"], result.data["failed"]) == (1, 1)
    # the first failure's own assertion, error-first
    assert result.error == ("1 failed, 1 passed: tests/test_calc.py::test_breaks - "
                            "assert (1 + 1) == 3")
    assert "test_breaks" in result.output


def test_a_path_and_extra_arguments_narrow_the_run(tool_ctx: ToolContext) -> None:
    result = run_test(write_in(tool_ctx, PASSING_AND_FAILING), "tests/test_calc.py", "-k", "adds")
    assert result.ok, result.output
    assert result.data["passed"] == 1
    assert result.data["deselected"] == 1


def test_no_tests_is_a_success_that_says_so(tool_ctx: ToolContext) -> None:
    write_in(tool_ctx, {"main.go.txt": "nothing here\n"})
    result = run_test(tool_ctx)
    assert result.ok
    assert result.data == {"runner": None, "skipped": True}  # shown `–`, never `✓`
    assert result.output.startswith("no tests to run:")


def test_pytest_collecting_nothing_is_a_success_with_a_note(tool_ctx: ToolContext) -> None:
    result = run_test(write_in(tool_ctx, {"pytest.ini": "[pytest]\n", "app.py": "x = 1\n"}))
    assert result.ok, result.output
    assert result.exit_code == 5
    assert result.data["note"] == "no tests collected"


@pytest.mark.parametrize(
    ("runner", "output", "counts"),
    [
        ("pytest", "..F\n== 1 failed, 2 passed, 1 skipped, 3 warnings in 0.1s ==\n",
         {"failed": 1, "passed": 2, "skipped": 1, "warnings": 3}),
        ("pytest", "1 passed, 2 errors in 0.2s\n", {"passed": 1, "errors": 2}),
        ("cargo", "test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured\n"
                  "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured\n",
         {"passed": 4, "failed": 2, "skipped": 1}),
        ("go", "--- FAIL: TestX (0.00s)\nFAIL\texample/x\t0.01s\nok  \texample/y\t0.02s\n",
         {"failed": 1, "passed_packages": 1, "failed_packages": 1}),
        ("npm", "Tests:       1 failed, 4 passed, 5 total\n", {"failed": 1, "passed": 4}),
        ("npm", "  3 passing (20ms)\n  1 failing\n", {"passed": 3, "failed": 1}),
        ("pytest", "no summary here\n", {}),
    ],
)
def test_summaries_are_parsed(runner: str, output: str, counts: dict[str, int]) -> None:
    assert parse_counts(runner, output) == counts
