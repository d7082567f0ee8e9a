"""`grep`: regex search respecting .gitignore, skipping binaries, capped with a count."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from normalize.task import ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.grep import GrepTool

RunTool = Callable[..., ActionResult]

# normalize.tools.files builds its .gitignore specs with pathspec's deprecated "gitwildmatch".
pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tool_ctx: ToolContext) -> Path:
    """A small repo: sources, an ignored node_modules, a binary holding the same text."""
    root = tool_ctx.workspace
    write(root, ".gitignore", "node_modules/\n")
    write(root, "src/app.js", "import { needle } from './lib';\n\nexport const hay = needle();\n")
    write(root, "src/lib.js", "export function needle() {\n  return 'Needle';\n}\n")
    write(root, "node_modules/pkg/index.js", "module.exports = function needle() {};\n")
    write(root, "assets/blob.bin", b"\x00\x01needle\x00")
    write(root, "README.md", "Find the NEEDLE in the haystack.\n")
    return root


def test_finds_matches_outside_ignored_directories(repo: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(), "needle")
    assert result.ok
    assert result.output.splitlines() == [
        "src/app.js:1: import { needle } from './lib';",
        "src/app.js:3: export const hay = needle();",
        "src/lib.js:1: export function needle() {",
    ]
    assert result.data["matches"] == 3 and result.data["files"] == 2
    # the binary is not read past its first NUL (its first byte), as ripgrep reads one
    assert result.data["skipped_binary"] == 0
    assert "node_modules" not in result.output and "blob.bin" not in result.output


def test_an_explicit_ignored_path_is_searched(repo: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(), "needle", "node_modules/pkg/index.js")
    assert result.output == "node_modules/pkg/index.js:1: module.exports = function needle() {};"


def test_options(repo: Path, run_tool: RunTool) -> None:
    insensitive = run_tool(GrepTool(), "needle", "-i")
    assert "README.md:1: Find the NEEDLE in the haystack." in insensitive.output.splitlines()
    assert insensitive.data["matches"] == 5
    files = run_tool(GrepTool(), "-l", "-i", "needle")
    assert files.output.splitlines() == ["README.md", "src/app.js", "src/lib.js"]
    within = run_tool(GrepTool(), "return", "src/lib.js")
    assert within.output == "src/lib.js:2:   return 'Needle';"
    fixed = run_tool(GrepTool(), "-F", "needle()")
    assert fixed.output.splitlines() == [
        "src/app.js:3: export const hay = needle();",
        "src/lib.js:1: export function needle() {",
    ]
    word = run_tool(GrepTool(), "-w", "hay", "--", ".")
    assert word.output == "src/app.js:3: export const hay = needle();"
    anchored = run_tool(GrepTool(), "^export", "src")
    assert anchored.data["matches"] == 2


def test_caps_with_a_count_of_what_was_left_out(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    for i in range(5):
        write(tool_ctx.workspace, f"f{i}.txt", "".join(f"hit {n}\n" for n in range(100)))
    result = run_tool(GrepTool(), "hit")
    lines = result.output.splitlines()
    assert len(lines) == 201
    assert lines[199] == "f1.txt:100: hit 99"
    assert lines[-1] == (
        "… 300 more matches in 3 files; --max 500 shows them all, -l lists the files"
    )
    assert result.data["matches"] == 500 and result.data["files"] == 5
    small = run_tool(GrepTool(), "hit", "--max", "150").output.splitlines()
    assert small[-1] == (
        "… 350 more matches in 4 files; --max 500 shows them all, -l lists the files"
    )
    one_file = run_tool(GrepTool(), "hit", "f0.txt", "--max=10").output.splitlines()
    assert one_file[-1] == (
        "… 90 more matches in 1 file; --max 100 shows them all, -l lists the files"
    )
    listed = run_tool(GrepTool(), "hit", "-l", "-m", "2").output.splitlines()
    assert listed == ["f0.txt", "f1.txt", "… 3 more files; --max 5 lists them all"]


def test_no_match(repo: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(), "pineapple")
    assert result.ok
    assert result.output == "no matches for pineapple"
    assert result.data["matches"] == 0 and result.data["exit_code"] == 1


def test_invalid_regex_names_the_pattern(repo: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(), "foo(")
    assert result.status is ResultStatus.ERROR
    assert result.error is not None
    assert result.error.startswith("invalid regex 'foo(': missing ), unterminated subpattern")


def test_argument_errors(repo: Path, run_tool: RunTool) -> None:
    assert run_tool(GrepTool()).error is not None
    unknown = run_tool(GrepTool(), "-z", "x")
    assert unknown.error is not None and unknown.error.startswith("unknown grep option -z")
    assert run_tool(GrepTool(), "x", "--max", "0").error == "--max needs a positive number, not '0'"
    missing = run_tool(GrepTool(), "x", "srcc")
    assert missing.error == "no such file or directory: srcc (did you mean src?)"
    dash = run_tool(GrepTool(), "--", "-> x")
    assert dash.ok and dash.output == "no matches for -> x"


def test_long_lines_are_cut_and_big_files_skipped(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "min.js", "var a=1;" * 200 + "needle\n")
    write(tool_ctx.workspace, "huge.txt", "needle\n" + "x" * 5000)
    result = run_tool(GrepTool(max_file_bytes=4000, engine="python"), "needle")
    first, *rest = result.output.splitlines()
    assert first.startswith("min.js:1: var a=1;")
    assert len(first) == len("min.js:1: ") + 300 and first.endswith("…")
    assert result.data["skipped_large"] == 1
    assert rest == ["(not searched, over the size limit: huge.txt)"]  # never silently
    on_rg = run_tool(GrepTool(max_file_bytes=4000, engine="rg"), "needle")
    assert on_rg.output.splitlines()[0] == "huge.txt:1: needle"  # ripgrep skips nothing for size


def test_crlf_and_non_utf8_files(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "win.txt", b"first\r\nneedle\r\nlast\r\n")
    write(tool_ctx.workspace, "latin.txt", "caf\xe9 needle\n".encode("latin-1"))
    result = run_tool(GrepTool(), "^needle$|needle$")
    assert result.output.splitlines() == ["latin.txt:1: caf\ufffd needle", "win.txt:2: needle"]


@pytest.mark.parametrize("path", ["..", "/etc", "../secret.txt", "link.txt", "up"])
def test_escapes_are_blocked(tool_ctx: ToolContext, run_tool: RunTool, path: str) -> None:
    secret = tool_ctx.workspace.parent / "secret.txt"
    secret.write_text("TOP SECRET\n", encoding="utf-8")
    os.symlink(secret, tool_ctx.workspace / "link.txt")
    os.symlink(tool_ctx.workspace.parent, tool_ctx.workspace / "up")
    result = run_tool(GrepTool(), "SECRET", path)
    assert result.status is ResultStatus.BLOCKED
    assert "TOP SECRET" not in result.output
    everywhere = run_tool(GrepTool(), "SECRET")
    assert everywhere.output == "no matches for SECRET"
