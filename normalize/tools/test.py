"""The `test` tool: finds the project's test runner and runs it.

Detection looks at the directory of the target (or the workspace) and its
parents up to the workspace root; the first that says how it is tested wins.
In each directory, in order:

1. pytest, configured: `[tool.pytest…]` in pyproject.toml, pytest.ini,
   `[tool:pytest]` in setup.cfg, `[pytest]` in tox.ini;
2. npm: package.json with a `scripts.test` that is not npm's placeholder;
3. cargo: Cargo.toml;
4. go: go.mod;
5. pytest, by convention: a `tests/` directory or `test_*.py` / `*_test.py`
   files anywhere below (gitignore respected).

pytest runs on normalize's own interpreter when it can import pytest there,
else as `pytest` from PATH.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from normalize.errors import ToolError
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.files import walk
from normalize.tools.run import (
    ProcessOutcome,
    outcome_result,
    project_venv,
    run_process,
    sandbox_of,
)
from normalize.tools.testout import (
    collection_error,
    first_failure,
    progress_counts,
    progress_feed,
)

__all__ = ["Runner", "TestTool", "detect_runner", "parse_counts", "pytest_command"]

NPM_PLACEHOLDER = "no test specified"
PYTEST_NO_TESTS = 5
_TEST_FILE_RE = re.compile(r"^(test_.*|.*_test)\.py$")
_COUNT_RE = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b"
)


@dataclass(frozen=True)
class Runner:
    """A detected test runner: its name, the directory it runs in, and why it was chosen."""

    name: str  # "pytest" | "npm" | "cargo" | "go"
    directory: Path
    reason: str


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _pytest_config(directory: Path) -> str | None:
    """Which file configures pytest in `directory`, or None."""
    pyproject = _read(directory / "pyproject.toml")
    if pyproject is not None:
        try:
            tool = tomllib.loads(pyproject).get("tool", {})
        except tomllib.TOMLDecodeError:
            tool = {}
        if isinstance(tool, dict) and "pytest" in tool:
            return "pyproject.toml [tool.pytest]"
    if (directory / "pytest.ini").is_file():
        return "pytest.ini"
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        text = _read(directory / name)
        if text is None:
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        if parser.has_section(section):
            return f"{name} [{section}]"
    return None


def _npm_test_script(directory: Path) -> str | None:
    text = _read(directory / "package.json")
    if text is None:
        return None
    try:
        package = json.loads(text)
    except json.JSONDecodeError:
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or NPM_PLACEHOLDER in script:
        return None
    return script


def _test_files(root: Path, directory: Path) -> str | None:
    """The first `test_*.py` / `*_test.py` below `directory` (gitignore respected), if any."""
    for path in walk(root, directory):
        if _TEST_FILE_RE.match(path.name):
            return path.relative_to(directory).as_posix()
    return None


def detect_runner(root: Path, target: Path | None = None) -> Runner | None:
    """The runner for `target` (default `root`): see the module docstring for the rules."""
    root = root.resolve()
    start = (target or root).resolve()
    if start.is_file():
        start = start.parent
    directories = [start, *(p for p in start.parents if p == root or root in p.parents)]
    for directory in directories:
        config = _pytest_config(directory)
        if config is not None:
            return Runner("pytest", directory, config)
        script = _npm_test_script(directory)
        if script is not None:
            return Runner("npm", directory, f"package.json scripts.test ({script})")
        if (directory / "Cargo.toml").is_file():
            return Runner("cargo", directory, "Cargo.toml")
        if (directory / "go.mod").is_file():
            return Runner("go", directory, "go.mod")
    for directory in directories:
        tests = directory / "tests"
        if tests.is_dir() and any(tests.rglob("*.py")):
            return Runner("pytest", directory, "a tests/ directory with Python files")
    found = _test_files(root, start)
    return None if found is None else Runner("pytest", start, f"test files ({found})")


QUICK_SECONDS = 60.0  # `test --quick` (the health workflow's) stops the suite after this long


def project_python(root: Path | None) -> str | None:
    """The interpreter of the project's own virtual environment, if it has one."""
    venv = project_venv(root)
    return None if venv is None else str(venv / "bin" / "python")


def _venv_has_pytest(python: str) -> bool:
    venv = Path(python).parent.parent
    return any(venv.glob("lib/python*/site-packages/pytest"))


def pytest_command(root: Path | None = None) -> list[str]:
    """How to start pytest: the project's venv, else this interpreter, else `pytest` on PATH.

    The project's own environment comes first, since only it has the project's
    dependencies installed; when it lacks pytest that is said, not papered over
    with another interpreter's pytest that cannot import the project.
    """
    own = project_python(root)
    if own is not None:
        if not _venv_has_pytest(own):
            venv = Path(own).parent.parent.name
            raise ToolError(f"pytest is not installed in the project's {venv}",
                            hint=f"{venv}/bin/python -m pip install pytest")
        return [own, "-m", "pytest"]
    if importlib.util.find_spec("pytest") is not None:
        return [sys.executable, "-m", "pytest"]
    found = shutil.which("pytest")
    if found is None:
        raise ToolError(
            f"pytest is not installed for {sys.executable} (nor on PATH)",
            hint=f"{sys.executable} -m pip install pytest",
        )
    return [found]


def _command(runner: Runner, target: Path | None, extra: list[str]) -> list[str]:
    rel = None
    if target is not None and target.resolve() != runner.directory:
        rel = target.resolve().relative_to(runner.directory).as_posix()
    if runner.name == "pytest":
        return [*pytest_command(runner.directory), "-q", *([rel] if rel else []), *extra]
    if runner.name == "npm":
        rest = [*([rel] if rel else []), *extra]
        return ["npm", "test", *(["--", *rest] if rest else [])]
    if runner.name == "cargo":
        return ["cargo", "test", *extra]
    package = f"./{rel}/..." if rel and target is not None and target.is_dir() else "./..."
    return ["go", "test", package, *extra]


def parse_counts(runner: str, output: str) -> dict[str, int]:
    """Test counts from a runner's summary (`passed`, `failed`, …); empty when none found."""
    counts: dict[str, int] = {}
    if runner == "cargo":
        for match in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored",
                                 output):
            for key, value in zip(("passed", "failed", "skipped"), match.groups(), strict=True):
                counts[key] = counts.get(key, 0) + int(value)
        return counts
    if runner == "go":
        found = {
            "failed": len(re.findall(r"^\s*--- FAIL:", output, re.MULTILINE)),
            "passed_packages": len(re.findall(r"^ok\s", output, re.MULTILINE)),
            "failed_packages": len(re.findall(r"^FAIL\s+\S", output, re.MULTILINE)),
        }
        return found if any(found.values()) else {}
    lines = [line for line in output.splitlines() if _COUNT_RE.search(line)]
    if runner == "npm":  # jest "Tests: 1 failed, 2 passed, 3 total"; mocha "2 passing"
        jest = [line for line in lines if line.lstrip().startswith("Tests:")]
        lines = jest[-1:] or lines[-1:]
        for number, word in re.findall(r"(\d+) (passing|failing|pending)\b", output):
            key = {"passing": "passed", "failing": "failed", "pending": "skipped"}[word]
            counts[key] = int(number)
    else:
        lines = lines[-1:]
    for line in lines:
        for number, word in _COUNT_RE.findall(line):
            key = {"error": "errors", "warning": "warnings"}.get(word, word)
            counts[key] = int(number)
    return counts


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items())


class TestTool:
    """`test [PATH] [ARGS...]`: detects the test runner and runs it."""

    __test__ = False  # not a pytest test class despite the name
    name: ClassVar[str] = "test"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "detects the project's test runner and runs it"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        args = list(action.args)
        quick = "--quick" in args  # the health workflow: bounded, and no pytest is a finding
        args = [a for a in args if a != "--quick"]
        target: Path | None = None
        if args and not args[0].startswith("-"):
            target = ctx.guard.resolve(args[0])
            if not target.exists():
                raise ToolError(f"no such file or directory: {args[0]}")
            args = args[1:]
        root = ctx.guard.root
        runner = detect_runner(root, target)
        if runner is None:
            where = ctx.guard.relative(target) if target is not None else "the workspace"
            return ActionResult.success(
                f"no tests to run: {where} has no pytest configuration or test files, "
                "no package.json test script, no Cargo.toml and no go.mod",
                data={"runner": None, "skipped": True},
            )
        try:
            argv = _command(runner, target, args)
        except ToolError as exc:
            if not quick:
                raise
            return ActionResult.success(
                f"tests not run: {exc} ({exc.hint})" if exc.hint else f"tests not run: {exc}",
                data={"runner": runner.name, "note": "not run", "skipped": True})
        timeout = float(action.params.get("timeout") or ctx.timeout)  # a workflow step's
        if quick:
            timeout = min(timeout, QUICK_SECONDS)
        outcome = run_process(argv, cwd=runner.directory, timeout=timeout, cancel=ctx.cancel,
                              on_spawn=ctx.on_spawn, on_writes=ctx.on_writes,
                              on_output=progress_feed(ctx.on_progress,
                                                      tests=runner.name == "pytest"),
                              **sandbox_of(ctx, action))
        counts = parse_counts(runner.name, outcome.output)
        data: dict[str, object] = {
            "runner": runner.name,
            "reason": runner.reason,
            "directory": ctx.guard.relative(runner.directory),
            **counts,
        }
        result = outcome_result(outcome, timeout, **data)
        if runner.name == "pytest":
            return _pytest_result(result, outcome, counts, quick=quick, timeout=timeout)
        if result.status is ResultStatus.ERROR and counts and not outcome.timed_out:
            result.error = f"{_describe(counts)} ({result.error})"
        if counts:
            result.output = f"{runner.name}: {_describe(counts)}\n{result.output}"
        return result


PYTEST_INTERRUPTED, PYTEST_USAGE = 2, 4


def _pytest_result(result: ActionResult, outcome: ProcessOutcome, counts: dict[str, int], *,
                   quick: bool, timeout: float) -> ActionResult:
    """pytest's result, its verdict first: counts, then the first failure or why not collected."""
    stopped = outcome.cancelled or outcome.timed_out
    log = result.output
    if outcome.exit_code == PYTEST_NO_TESTS and not stopped:
        result.status, result.error = ResultStatus.SUCCESS, None
        result.data.update(note="no tests collected", skipped=True)
        result.output = f"no tests collected (pytest exit status 5)\n{log}"
        return result
    if outcome.timed_out and quick:
        counts = progress_counts(log)
        result.data.update(counts, note="time limit")
        failed = counts.get("failed", 0) + counts.get("errors", 0)
        verdict = (f"{_describe(counts) or 'no test finished'} in the first {timeout:g}s "
                   "(a quick run stops there; `normalize test` runs them all)")
        result.status = ResultStatus.ERROR if failed else ResultStatus.SUCCESS
        result.error = verdict if failed else None
        result.output = "\n".join([f"pytest: {verdict}", *first_failure(log), log])
        return result
    if result.status is not ResultStatus.ERROR or stopped:
        if counts:
            result.output = f"pytest: {_describe(counts)}\n{log}"
        return result
    ran = counts.get("passed", 0) + counts.get("failed", 0)
    if outcome.exit_code in (PYTEST_INTERRUPTED, PYTEST_USAGE) and not ran:
        why = collection_error(log)
        many = f" ({_describe(counts)})" if counts else ""
        result.error = f"tests cannot be collected{many}: {why}"
        result.output = f"pytest: {result.error}\n{log}"
        return result
    failure = first_failure(log)
    head = failure[0].removeprefix("FAILED ") if failure else ""
    result.error = f"{_describe(counts)}: {head}" if head and counts else \
        f"{_describe(counts)} ({result.error})" if counts else result.error
    result.output = "\n".join([f"pytest: {_describe(counts)}" if counts else "pytest:",
                               *failure, log])
    return result
