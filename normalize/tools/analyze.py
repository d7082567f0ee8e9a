"""The `analyze` tool: a health summary of the code, and the type checker and linter.

The health scan walks the tree once (gitignore respected, binaries skipped):
files and lines by language, the largest files, TODO-style markers (lines
where one opens the line or follows a comment leader), and the cyclomatic
complexity of every Python function (via `ast`). Complexity is 1 plus one for
each `if`/`elif`/ternary, `for`, `while`, `except`, `with`, `assert`, `match`
case and comprehension `if`, plus one for each extra operand of `and`/`or`.
Nested functions are counted on their own.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import importlib.util
import re
import shutil
import sys
import threading
import tomllib
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from normalize.cancel import CancelToken
from normalize.errors import ToolError
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.files import BINARY_SNIFF, language_of, walk
from normalize.tools.run import run_process, sandbox_of

__all__ = [
    "AnalyzeTool",
    "FunctionComplexity",
    "Health",
    "complexity",
    "function_complexities",
    "scan",
]

MODES = ("--health", "--complexity", "--types", "--lint")
DEFAULT_THRESHOLD = 10
TOP_FILES = 5
TOP_FUNCTIONS = 10
MARKER_LOCATIONS = 5
MAX_PARSE_BYTES = 1_000_000  # larger Python files are counted but not parsed
_MARKER_RE = re.compile(rb"\b(TODO|FIXME|XXX|HACK)\b")
_COMMENT_LEADERS = (b"#", b"//", b"/*", b"<!--", b"--", b";")
_BRANCH_TYPES = frozenset({
    ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.With,
    ast.AsyncWith, ast.Assert, ast.match_case,
})
_LEAF_TYPES = frozenset({
    ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.alias, ast.Pass, ast.Break,
    ast.Continue,
})


@dataclass(frozen=True)
class FunctionComplexity:
    """One function's cyclomatic complexity and where it is defined."""

    path: str
    line: int
    name: str
    complexity: int

    def row(self) -> str:
        return f"{self.path}:{self.line} {self.name} {self.complexity}"


def _tally(body: list[ast.stmt], path: str, prefix: str) -> list[FunctionComplexity]:
    """One pass over `body`: every function in it with its complexity, in source order.

    Hand-rolled rather than `ast.walk` + `ast.iter_child_nodes`: it visits each
    node once for all functions, and skips leaves, which makes it several
    times faster on large trees.
    """
    records: list[list[Any]] = []  # [line, name, complexity]
    stack: list[tuple[ast.AST, int, str]] = [(node, -1, prefix) for node in body]
    while stack:
        node, owner, prefix = stack.pop()
        kind = type(node)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            name = prefix + node.name
            records.append([node.lineno, name, 1])
            index = len(records) - 1
            stack.extend((child, index, name + ".") for child in node.body)
            continue
        if kind is ast.ClassDef:
            assert isinstance(node, ast.ClassDef)
            stack.extend((child, -1, f"{prefix}{node.name}.") for child in node.body)
            continue
        if owner >= 0:
            if kind in _BRANCH_TYPES:
                records[owner][2] += 1
            elif kind is ast.BoolOp:
                assert isinstance(node, ast.BoolOp)
                records[owner][2] += len(node.values) - 1
            elif kind is ast.comprehension:
                assert isinstance(node, ast.comprehension)
                records[owner][2] += len(node.ifs)
        for field_name in node._fields:
            value = getattr(node, field_name, None)
            if type(value) is list:
                stack.extend(
                    (child, owner, prefix)
                    for child in value
                    if isinstance(child, ast.AST) and type(child) not in _LEAF_TYPES
                )
            elif isinstance(value, ast.AST) and type(value) not in _LEAF_TYPES:
                stack.append((value, owner, prefix))
    found = [FunctionComplexity(path, line, name, n) for line, name, n in records]
    found.sort(key=lambda f: (f.line, f.name))
    return found


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The cyclomatic complexity of one function, nested functions and classes excluded."""
    return _tally([function], "", "")[0].complexity if function.body else 1


def function_complexities(tree: ast.Module, path: str) -> list[FunctionComplexity]:
    """Every function and method in `tree`, named `Class.method` / `outer.inner`."""
    return _tally(tree.body, path, "")


@dataclass
class Health:
    """What one walk over the tree found; `to_dict` is the JSON form."""

    files: int = 0
    lines: int = 0
    binaries: int = 0
    languages: dict[str, dict[str, int]] = field(default_factory=dict)
    sizes: list[tuple[str, int, int]] = field(default_factory=list)  # path, lines, bytes
    functions: list[FunctionComplexity] = field(default_factory=list)
    markers: dict[str, int] = field(default_factory=dict)
    marker_locations: list[str] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    cancelled: bool = False

    @property
    def todo_count(self) -> int:
        return sum(self.markers.values())

    def largest(self) -> list[tuple[str, int, int]]:
        return sorted(self.sizes, key=lambda s: (-s[1], s[0]))[:TOP_FILES]

    def most_complex(self, limit: int | None = TOP_FUNCTIONS) -> list[FunctionComplexity]:
        ranked = sorted(self.functions, key=lambda f: (-f.complexity, f.path, f.line))
        return ranked if limit is None else ranked[:limit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "lines": self.lines,
            "binaries_skipped": self.binaries,
            "languages": self.languages,
            "largest": [{"path": p, "lines": n, "bytes": b} for p, n, b in self.largest()],
            "functions": len(self.functions),
            "most_complex": [asdict(f) for f in self.most_complex()],
            "todos": {
                "count": self.todo_count,
                "by_kind": dict(sorted(self.markers.items())),
                "first": self.marker_locations,
            },
            "unparsed": self.unparsed,
        }


def _count_lines(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


class _ParseMemo:
    """Functions found per (path, content digest), so analyzing again skips unchanged files."""

    limit = 50_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, bytes], list[FunctionComplexity] | None] = {}

    def functions(self, data: bytes, rel: str) -> list[FunctionComplexity] | None:
        """The file's functions, or None when it does not parse."""
        key = (rel, hashlib.blake2b(data, digest_size=16).digest())
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data, filename=rel)
            found: list[FunctionComplexity] | None = function_complexities(tree, rel)
        except (SyntaxError, ValueError, RecursionError):
            found = None
        with self._lock:
            if len(self._entries) >= self.limit:
                self._entries.clear()
            self._entries[key] = found
        return found


_MEMO = _ParseMemo()


def _parse(data: bytes, rel: str, health: Health) -> None:
    found = _MEMO.functions(data, rel)
    if found is None:
        health.unparsed.append(rel)
    else:
        health.functions.extend(found)


def _markers(data: bytes, rel: str, health: Health) -> None:
    """Count lines whose first marker opens the line or follows a comment leader."""
    last_line_start = -1
    for match in _MARKER_RE.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        if start == last_line_start:
            continue
        prefix = data[start : match.start()].strip()
        if prefix not in (b"", b"*") and not any(lead in prefix for lead in _COMMENT_LEADERS):
            continue
        last_line_start = start
        kind = match.group(1).decode()
        health.markers[kind] = health.markers.get(kind, 0) + 1
        if len(health.marker_locations) < MARKER_LOCATIONS:
            line_no = data.count(b"\n", 0, start) + 1
            end = data.find(b"\n", match.start())
            text = data[start : end if end >= 0 else len(data)].decode("utf-8", "replace").strip()
            health.marker_locations.append(f"{rel}:{line_no}: {text[:100]}")


def scan(
    root: Path, start: Path, *, python_only: bool = False, cancel: CancelToken | None = None
) -> Health:
    """Walk `start` (inside `root`) once and gather the health numbers; stops on cancel."""
    health = Health()
    for path in walk(root, start):
        if cancel is not None and cancel.cancelled:
            health.cancelled = True
            break
        language = language_of(path)
        is_python = path.suffix == ".py"
        if python_only and not is_python:
            continue
        try:
            with path.open("rb") as fh:
                head = fh.read(BINARY_SNIFF)
                if b"\x00" in head:
                    health.binaries += 1
                    continue
                data = head + fh.read()
        except OSError:
            continue
        rel = path.relative_to(root).as_posix()
        lines = _count_lines(data)
        health.files += 1
        health.lines += lines
        stats = health.languages.setdefault(language or "Other", {"files": 0, "lines": 0})
        stats["files"] += 1
        stats["lines"] += lines
        health.sizes.append((rel, lines, len(data)))
        _markers(data, rel, health)
        if is_python and len(data) <= MAX_PARSE_BYTES:
            _parse(data, rel, health)
    health.languages = dict(
        sorted(health.languages.items(), key=lambda kv: (-kv[1]["lines"], kv[0]))
    )
    return health


def _summary(health: Health, where: str, threshold: int) -> str:
    if not health.files:
        return f"{where} holds no text files."
    parts = [f"{where} holds {health.files} files with {health.lines} lines"]
    if health.languages:
        language, stats = next(iter(health.languages.items()))
        share = 100 * stats["lines"] // max(health.lines, 1)
        parts[0] += f", mostly {language} ({share}% of lines)."
    path, lines, _ = health.largest()[0]
    parts.append(f"The largest file is {path} ({lines} lines).")
    ranked = health.most_complex(1)
    if ranked:
        top = ranked[0]
        over = sum(1 for f in health.functions if f.complexity > threshold)
        parts.append(
            f"The most complex function is {top.name} at {top.path}:{top.line} (complexity "
            f"{top.complexity}); {over} of {len(health.functions)} functions exceed {threshold}."
        )
    parts.append(f"{health.todo_count} TODO/FIXME/XXX/HACK markers.")
    return " ".join(parts)


def health_report(health: Health, where: str, threshold: int) -> str:
    """The `--health` text."""
    out = [f"{health.files} files, {health.lines} lines in {where}"]
    if health.languages:
        out.append("languages:")
        width = max(len(name) for name in health.languages)
        for name, stats in health.languages.items():
            out.append(f"  {name:<{width}}  {stats['files']:>6} files  {stats['lines']:>8} lines")
    if health.sizes:
        out.append("largest files:")
        out.extend(f"  {path}  {lines} lines" for path, lines, _ in health.largest())
    if health.functions:
        out.append("most complex functions:")
        out.extend(f"  {f.row()}" for f in health.most_complex())
    out.append(f"TODO/FIXME/XXX/HACK: {health.todo_count}")
    out.extend(f"  {location}" for location in health.marker_locations)
    if health.unparsed:
        out.append(f"not parsed (syntax errors): {', '.join(health.unparsed[:5])}")
    out.append(f"summary: {_summary(health, where, threshold)}")
    return "\n".join(out)


def complexity_report(health: Health, over: list[FunctionComplexity], threshold: int) -> str:
    """The `--complexity` text: the functions above `threshold`, most complex first."""
    if not over:
        return f"no function has a complexity above {threshold} ({len(health.functions)} checked)"
    lines = [f"{len(over)} of {len(health.functions)} functions above complexity {threshold}:"]
    lines.extend(f"  {f.row()}" for f in over)
    return "\n".join(lines)


@dataclass
class CheckerRun:
    """The outcome of a type checker or linter: its name, issue count, output and status."""

    kind: str  # "types" | "lint"
    tool: str | None
    output: str
    errors: int | None = None
    failed: str | None = None  # the checker itself could not run properly
    cancelled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "installed": self.tool is not None, "errors": self.errors}


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _mypy_configured_files(root: Path) -> bool:
    """True when a mypy config names its own `files`/`packages`/`modules`."""
    keys = {"files", "packages", "modules"}
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        mypy = data.get("tool", {}).get("mypy", {})
        if isinstance(mypy, dict) and keys & mypy.keys():
            return True
    except (OSError, tomllib.TOMLDecodeError):
        pass
    for name in ("mypy.ini", ".mypy.ini", "setup.cfg"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read(root / name, encoding="utf-8")
        except configparser.Error:
            continue
        if parser.has_section("mypy") and keys & set(parser.options("mypy")):
            return True
    return False


def _checker_argv(kind: str, target: str | None, root: Path) -> tuple[str, list[str]] | None:
    """Which checker to run and how, or None when none is installed."""
    if kind == "types":
        mypy_target = [target] if target else ([] if _mypy_configured_files(root) else ["."])
        if _has_module("mypy"):
            return "mypy", [sys.executable, "-m", "mypy", *mypy_target]
        if (found := shutil.which("mypy")) is not None:
            return "mypy", [found, *mypy_target]
        if (found := shutil.which("pyright")) is not None:
            return "pyright", [found, *([target] if target else [])]
        return None
    ruff_args = ["check", "--output-format", "concise", target or "."]
    if _has_module("ruff"):
        return "ruff", [sys.executable, "-m", "ruff", *ruff_args]
    if (found := shutil.which("ruff")) is not None:
        return "ruff", [found, *ruff_args]
    return None


_COUNT_PATTERNS = {
    "mypy": (re.compile(r"^Found (\d+) errors? in \d+ files?", re.M), re.compile(r"^Success: ")),
    "pyright": (re.compile(r"^(\d+) errors?, \d+ warnings?", re.M), None),
    "ruff": (re.compile(r"^Found (\d+) errors?\.", re.M), re.compile(r"^All checks passed", re.M)),
}


def _count_issues(tool: str, output: str) -> int | None:
    found, clean = _COUNT_PATTERNS[tool]
    matches = found.findall(output)
    if matches:
        return int(matches[-1])
    if clean is not None and clean.search(output):
        return 0
    return None


def run_checker(kind: str, target: str | None, ctx: ToolContext) -> CheckerRun:
    """Run the type checker (`types`) or the linter (`lint`) over `target`."""
    chosen = _checker_argv(kind, target, ctx.guard.root)
    if chosen is None:
        what = (
            "no type checker installed: install mypy (`pip install mypy`) or pyright"
            if kind == "types"
            else "no linter installed: install ruff (`pip install ruff`)"
        )
        return CheckerRun(kind, None, what)
    tool, argv = chosen
    outcome = run_process(argv, cwd=ctx.guard.root, timeout=ctx.timeout, cancel=ctx.cancel,
                          **sandbox_of(ctx))
    errors = _count_issues(tool, outcome.output)
    run = CheckerRun(kind, tool, outcome.output.rstrip("\n"), errors, cancelled=outcome.cancelled)
    reason = outcome.failure(ctx.timeout)
    if outcome.timed_out or outcome.cancelled:
        run.failed = f"{tool} {reason}"
    elif errors is None and reason is not None:  # no summary: the checker itself broke
        run.failed = f"{tool} failed ({reason})"
    return run


def _parse_args(args: list[str]) -> tuple[str | None, set[str], int]:
    target: str | None = None
    modes: set[str] = set()
    threshold = DEFAULT_THRESHOLD
    words = list(args)
    while words:
        word = words.pop(0)
        if word in MODES:
            modes.add(word)
        elif word in ("--threshold", "--min"):
            if not words or not words[0].isdigit():
                raise ToolError(f"{word} needs a whole number")
            threshold = int(words.pop(0))
        elif word.startswith("-"):
            raise ToolError(
                f"unknown option {word} (expected {', '.join(MODES)} or --threshold N)"
            )
        elif target is None:
            target = word
        else:
            raise ToolError(f"analyze takes one path, got {target!r} and {word!r}")
    return target, modes or {"--health"}, threshold


class AnalyzeTool:
    """`analyze [PATH] [--health] [--complexity] [--types] [--lint] [--threshold N]`."""

    name: ClassVar[str] = "analyze"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "health summary; complexity; type checker and linter when installed"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        target, modes, threshold = _parse_args(action.args)
        start = ctx.guard.resolve(target or ".")
        if not start.exists():
            raise ToolError(f"no such file or directory: {target}")
        where = ctx.guard.relative(start)
        rel_target = None if target is None else where
        sections: list[tuple[str, str]] = []
        data: dict[str, Any] = {}
        problems: list[str] = []
        cancelled = False
        if "--health" in modes or "--complexity" in modes:
            health = scan(
                ctx.guard.root, start, python_only="--health" not in modes, cancel=ctx.cancel
            )
            cancelled = health.cancelled
            if "--health" in modes:
                sections.append(("health", health_report(health, where, threshold)))
                data["health"] = health.to_dict()
            if "--complexity" in modes:
                over = [f for f in health.most_complex(None) if f.complexity > threshold]
                sections.append(("complexity", complexity_report(health, over, threshold)))
                data["complexity"] = {
                    "threshold": threshold,
                    "checked": len(health.functions),
                    "above": [asdict(f) for f in over],
                }
        for mode, kind in (("--types", "types"), ("--lint", "lint")):
            if mode not in modes:
                continue
            checker = run_checker(kind, rel_target, ctx)
            title = kind if checker.tool is None else f"{kind} ({checker.tool})"
            sections.append((title, checker.output or "(no output)"))
            data[kind] = checker.to_dict()
            cancelled = cancelled or checker.cancelled
            if checker.failed:
                problems.append(checker.failed)
            elif checker.errors:
                noun = "error" if checker.errors == 1 else "errors"
                problems.append(f"{checker.tool}: {checker.errors} {noun}")
        if len(sections) == 1:
            output = sections[0][1]
        else:
            output = "\n\n".join(f"== {title} ==\n{text}" for title, text in sections)
        if cancelled:
            return ActionResult(ResultStatus.CANCELLED, output, error="cancelled", data=data)
        if problems:
            return ActionResult.failure("; ".join(problems), output, data=data)
        return ActionResult.success(output, data=data)
