"""`grep` on ripgrep agrees with `rg` itself and with the Python engine on awkward files."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from normalize.task import ActionResult
from normalize.tools.base import ToolContext
from normalize.tools.grep import GrepTool
from normalize.tools.ripgrep import find_rg

RunTool = Callable[..., ActionResult]
RG = find_rg()
needs_rg = pytest.mark.skipif(RG is None, reason="rg not installed (pip install ripgrep)")
pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")
PATTERNS = ["needle", r"needle\s+$", "^needle", r"\bneedle$", "(?i)NEEDLE"]


@pytest.fixture
def awkward(tool_ctx: ToolContext) -> Path:
    """A tree with a late NUL byte, CRLF files, a BOM, an ignored file and plain text."""
    root = tool_ctx.workspace
    (root / "src").mkdir()
    (root / ".gitignore").write_text("ignored.txt\n", encoding="utf-8")
    (root / "ignored.txt").write_text("needle\n", encoding="utf-8")
    # the NUL is 200 KB in, far past any first-block sniff: the file is binary all the same
    (root / "late.log").write_bytes(b"needle early\n" + b"x" * 200_000 + b"\n\x00needle\n")
    (root / "early.bin").write_bytes(b"\x00\x01needle\x00")
    (root / "src" / "win.txt").write_bytes(b"first\r\nneedle  \r\nx needle\r\nlast\r\n")
    (root / "src" / "bom.py").write_bytes(b"\xef\xbb\xbfneedle = 1\nprint(needle)\n")
    (root / "src" / "plain.md").write_text("a needle\nno match\nneedle\n", encoding="utf-8")
    return root


def rg_matches(root: Path, pattern: str) -> set[tuple[str, int]]:
    """(path, line) pairs `rg --json` reports in files it did not find binary."""
    assert RG is not None
    out = subprocess.run(
        [RG, "--json", "--crlf", "--no-require-git", "--hidden", "--glob", "!.git", pattern],
        cwd=root, capture_output=True, check=False,
    ).stdout  # fmt: skip
    per_file: dict[str, list[int]] = {}
    binary: set[str] = set()
    for line in out.splitlines():
        event = json.loads(line)
        data = event["data"]
        if event["type"] == "match":
            per_file.setdefault(data["path"]["text"], []).append(data["line_number"])
        elif event["type"] == "end" and data["binary_offset"] is not None:
            binary.add(data["path"]["text"])
    return {(path, n) for path, lines in per_file.items() if path not in binary for n in lines}


def grep_matches(run_tool: RunTool, tool: GrepTool, pattern: str) -> set[tuple[str, int]]:
    result = run_tool(tool, pattern, "--max", "1000")
    found = set()
    for line in result.output.splitlines():
        if line.startswith(("no matches", "(")):
            continue
        path, number, _ = line.split(":", 2)
        found.add((path, int(number)))
    return found


@needs_rg
@pytest.mark.parametrize("pattern", PATTERNS)
def test_grep_agrees_with_rg_and_with_python(
    awkward: Path, run_tool: RunTool, pattern: str
) -> None:
    expected = rg_matches(awkward, pattern)
    assert expected  # every pattern matches something here
    assert ("late.log", 1) not in expected  # ripgrep drops the file once it meets the NUL
    assert grep_matches(run_tool, GrepTool(engine="rg"), pattern) == expected
    assert grep_matches(run_tool, GrepTool(engine="python"), pattern) == expected


@needs_rg
def test_crlf_bom_and_late_binaries(awkward: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(engine="rg"), r"needle\s*$")
    assert result.output.splitlines() == [
        "src/plain.md:1: a needle",
        "src/plain.md:3: needle",
        "src/win.txt:2: needle",
        "src/win.txt:3: x needle",
    ]
    # both binaries dropped; neither counted: no match comes before its first NUL, where
    # ripgrep stops reading a binary file
    assert result.data["skipped_binary"] == 0
    assert result.data["engine"] == "rg"
    for engine in ("rg", "python"):  # late.log's first line matches before its NUL
        assert run_tool(GrepTool(engine=engine), "needle").data["skipped_binary"] == 1, engine
    bom = run_tool(GrepTool(engine="rg"), "^needle =")
    assert bom.output == "src/bom.py:1: needle = 1"  # the BOM is not part of the line


@needs_rg
def test_patterns_rg_rejects_run_in_python(awkward: Path, run_tool: RunTool) -> None:
    result = run_tool(GrepTool(), r"(?<=a )needle")
    assert result.output.splitlines()[0] == "src/plain.md:1: a needle"
    assert result.data["engine"] == "python"
    assert "ripgrep cannot run this pattern" in result.output.splitlines()[-1]


def test_without_rg_python_searches_and_says_so(
    awkward: Path, run_tool: RunTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("normalize.tools.grep.find_rg", lambda _workspace=None: None)
    result = run_tool(GrepTool(), "needle", "src/plain.md")
    assert result.output.splitlines() == [
        "src/plain.md:1: a needle",
        "src/plain.md:3: needle",
        "(ripgrep not found; searched with Python's re, slower)",
    ]
    assert result.data["engine"] == "python"


def test_the_ripgrep_wheels_binary_is_found_beside_the_interpreter() -> None:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        files = distribution("ripgrep").files or []
    except PackageNotFoundError:
        pytest.skip("the ripgrep wheel is not installed")
    shipped = [f for f in files if f.name == "rg"]
    assert shipped, "the ripgrep wheel ships no rg"
    assert RG is not None
    assert Path(RG).resolve() == Path(str(shipped[0].locate())).resolve()


MEASURE = ("import resource, subprocess, sys\n"
           "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
           "sys.stdout.write(done.stdout + done.stderr)\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def _peak_mb(argv: list[str], cwd: Path) -> tuple[float, str]:
    """Peak RSS (MB) of the largest process of the command, and its output.

    Measured by a small Python in between: a process forked from this big pytest
    process would count the parent's pages from before its exec.
    """
    import sys

    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], cwd=cwd, capture_output=True,
                          text=True, check=True)
    *out, peak = done.stdout.splitlines()
    return int(peak) / 1024, "\n".join(out)


@needs_rg
@pytest.mark.parametrize("size", [4_000_000, 50_000_000], ids=["bundle-4MB", "line-50MB"])
def test_grep_memory_stays_bounded_on_one_huge_line(tmp_path: Path, size: int) -> None:
    import sys

    block = b"var a=function(b){return b+1};" * 1024
    with open(tmp_path / "huge.min.js", "wb") as fh:
        for _ in range(size // len(block)):
            fh.write(block)
        fh.write(b"\n")
    normalize = str(Path(sys.executable).parent / "normalize")
    mb, out = _peak_mb([normalize, "grep", "[a-z]", "huge.min.js"], tmp_path)
    lines = out.splitlines()
    assert lines[0].startswith("huge.min.js:1: var a=function(b){return b+1};")
    assert lines[0].endswith("…") and len(lines[0]) < 400
    assert lines[1] == "(1 matching line(s) over 2,000 bytes: only the start of each was read)"
    assert mb < 100, f"{mb:.0f} MB"  # before: 813 MB for 4 MB, 9,981 MB for 50 MB


@needs_rg
def test_a_file_with_many_matches_is_counted_whole_but_held_only_to_the_cap(
        awkward: Path, run_tool: RunTool) -> None:
    (awkward / "many.txt").write_text("needle\n" * 5000, encoding="utf-8")
    result = run_tool(GrepTool(engine="rg"), "needle", "many.txt", "--max", "3")
    assert result.output.splitlines() == [
        "many.txt:1: needle", "many.txt:2: needle", "many.txt:3: needle",
        "… 4,997 more matches in 1 file; --max 5000 shows them all, -l lists the files"]
    assert result.data["matches"] == 5000
