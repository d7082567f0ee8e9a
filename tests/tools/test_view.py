"""`view` and `skeleton`: files, ranges, symbols, big files, trees, errors and escapes."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TypeVar

import pytest

from normalize import fsopen
from normalize.task import ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.skeleton import SkeletonTool
from normalize.tools.view import ViewTool

RunTool = Callable[..., ActionResult]
T = TypeVar("T")

SAMPLES = ["sample.py", "sample.js", "sample.ts", "sample.go", "sample.rs", "sample.java",
           "sample.c", "sample.cpp"]  # fmt: skip
# normalize.tools.files builds its .gitignore specs with pathspec's deprecated "gitwildmatch".
pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")

NUMBERED = re.compile(r"^ *(\d+)│(?: (.*))?$")


def numbers(output: str) -> list[int]:
    """The line numbers of a numbered listing (asserting every line is numbered)."""
    found = []
    for line in output.splitlines():
        match = NUMBERED.match(line)
        assert match, f"not a numbered line: {line!r}"
        found.append(int(match[1]))
    return found


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- whole files --------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_view_file_shows_every_line_numbered(samples: Path, run_tool: RunTool, name: str) -> None:
    result = run_tool(ViewTool(), name)
    assert result.ok, result.error
    lines = (samples / name).read_text(encoding="utf-8").splitlines()
    assert numbers(result.output) == list(range(1, len(lines) + 1))
    assert result.output.splitlines()[0] == f"   1│ {lines[0]}"
    assert result.data["kind"] == "file"


def test_line_format(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "a.txt", "first\n\n  indented\r\nlast")
    result = run_tool(ViewTool(), "a.txt")
    assert result.output == "   1│ first\n   2│\n   3│   indented\n   4│ last"


def test_binary_empty_and_non_utf8_files(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tool_ctx.workspace, "empty.py", "")
    write(tool_ctx.workspace, "latin.txt", "caf\xe9\n".encode("latin-1"))
    binary = run_tool(ViewTool(), "logo.png")
    assert binary.ok and binary.output == "logo.png: binary file (16 bytes); not shown"
    assert run_tool(ViewTool(), "empty.py").output == "empty.py: empty file"
    assert run_tool(ViewTool(), "latin.txt").output == "   1│ caf\ufffd"


def test_a_fifo_is_refused_by_name_and_never_waited_on(tool_ctx: ToolContext,
                                                       run_tool: RunTool) -> None:
    fifo = tool_ctx.workspace / "pipe"
    os.mkfifo(fifo)  # opening it to read waits for a writer
    for spec in ("pipe", "pipe:1-5"):
        result = _unblocked(fifo, lambda spec=spec: run_tool(ViewTool(), spec))
        assert not result.ok and result.error == "pipe: a FIFO, not a regular file; not read"
    with pytest.raises(OSError, match="not a regular file"):
        _unblocked(fifo, lambda: fsopen.read_bytes(tool_ctx.workspace, "pipe"))


def _unblocked(fifo: Path, call: Callable[[], T]) -> T:
    """`call()`; if it blocks opening `fifo`, a writer releases it and the test fails."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(call)
        try:
            return future.result(timeout=20)
        except FutureTimeout:
            while not future.done():  # writers release every blocked open, then it fails
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                time.sleep(0.01)
            raise AssertionError(f"blocked opening the FIFO {fifo.name}") from None


# --- symbols --------------------------------------------------------------------

# (file, symbol spec, first line, last line, text inside, text just past the end)
SYMBOL_VIEWS = [
    ("sample.py", "Inventory/add", 16, 20, 'raise ValueError("inventory full")', "@property"),
    ("sample.js", "Emitter/on", 9, 13, "list.push(handler);", "emit(event, ...args)"),
    ("sample.ts", "Queue/push", 20, 26, "this.jobs.push(job);", "async drain"),
    ("sample.go", "Server/Start", 23, 30, 'errors.New("no address")', "// Stop closes"),
    ("sample.rs", "Point/distance", 17, 19, ".sqrt()", "impl fmt::Display"),
    ("sample.java", "Account/deposit", 15, 20, "history.add(cents);", "@Override"),
    ("sample.c", "stack_push", 20, 27, "s->items[s->top++] = value;", "static double mean"),
    ("sample.cpp", "geo/Circle/area", 12, 14, "M_PI * radius_ * radius_", "describe() const;"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "spec", "first", "last", "inside", "after"),
    SYMBOL_VIEWS,
    ids=[f"{t[0]}/{t[1]}" for t in SYMBOL_VIEWS],
)
def test_view_symbol_shows_exactly_its_source(
    samples: Path, run_tool: RunTool, name: str, spec: str, first: int, last: int, inside: str,
    after: str,
) -> None:  # fmt: skip
    result = run_tool(ViewTool(), f"{name}/{spec}")
    assert result.ok, result.error
    if result.output.startswith("note: "):  # the other definitions (a C prototype)
        assert "others" in result.data
        del result.data["others"]
        result.output = result.output.split("\n", 1)[1]
    assert numbers(result.output) == list(range(first, last + 1))
    assert inside in result.output
    assert after not in result.output
    source = (samples / name).read_text(encoding="utf-8").splitlines()
    shown = [NUMBERED.match(line)[2] or "" for line in result.output.splitlines()]  # type: ignore[index]
    assert shown == source[first - 1 : last]
    assert result.data == {"path": name, "kind": "symbol", "symbol": spec, "start": first,
                           "end": last}  # fmt: skip


def test_view_symbol_includes_decorators_and_nests(samples: Path, run_tool: RunTool) -> None:
    total = run_tool(ViewTool(), "sample.py/Inventory/total").output
    assert total.splitlines()[0] == "  22│     @property"
    render = run_tool(ViewTool(), "sample.py/Inventory/Report/render")
    assert numbers(render.output) == [29, 30, 31]
    dotted = run_tool(ViewTool(), "sample.py/Inventory.add")
    assert numbers(dotted.output) == list(range(16, 21))


def test_view_symbol_in_a_subdirectory(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "pkg/sub/calc.py", "def mean(xs):\n    return sum(xs)\n\nX = 1\n")
    result = run_tool(ViewTool(), "pkg/sub/calc.py/mean")
    assert result.output == "   1│ def mean(xs):\n   2│     return sum(xs)"


def test_an_existing_path_wins_over_a_symbol_reading(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    write(tool_ctx.workspace, "lib.py/mean", "not python, a file named mean\n")
    result = run_tool(ViewTool(), "lib.py/mean")
    assert result.output == "   1│ not python, a file named mean"


def test_unknown_symbol_lists_top_level_symbols(samples: Path, run_tool: RunTool) -> None:
    result = run_tool(ViewTool(), "sample.py/Inventory/remove")
    assert result.status is ResultStatus.ERROR
    assert result.error == (
        "no symbol 'Inventory/remove' in sample.py; top-level symbols: "
        "MAX_ITEMS, Inventory, mean, fetch_all"
    )


def test_symbol_in_an_unsupported_file(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "notes.md", "# Notes\n")
    result = run_tool(ViewTool(), "notes.md/Notes")
    assert result.status is ResultStatus.ERROR
    assert result.error is not None and "cannot outline notes.md" in result.error


def test_a_huge_symbol_shows_its_outline(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    methods = "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(40))
    write(tool_ctx.workspace, "big.py", f"class Big:\n{methods}")
    result = run_tool(ViewTool(max_lines=50), "big.py/Big")
    first, *rest = result.output.splitlines()
    assert first.startswith("… big.py/Big spans 120 lines; showing its outline.")
    assert rest[0] == "  1-120  class Big:" and rest[1] == "    2-3    def m0(self):"
    assert result.data["kind"] == "outline"


# --- big files --------------------------------------------------------------------


def test_a_5000_line_file_gives_its_skeleton_and_a_hint(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    body = "".join(f"def f{i}(x: int) -> int:\n    y = x + {i}\n    z = y * 2\n    return z\n\n"
                   for i in range(1000))  # fmt: skip
    write(tool_ctx.workspace, "big.py", body)
    result = run_tool(ViewTool(), "big.py")
    lines = result.output.splitlines()
    assert lines[0] == (
        "… big.py: 5,000 lines; showing the outline. "
        "Use view big.py:START-END or view big.py/SYMBOL"
    )
    assert lines[1] == "      1-4  def f0(x: int) -> int:"
    assert len(lines) < 600
    assert lines[-1] == "… 600 more symbols; skeleton big.py --offset 400 shows the rest"
    assert "return z" not in result.output
    assert result.data == {"path": "big.py", "kind": "outline", "lines": 5000}


def test_big_file_thresholds_are_options(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "small.py", "def f():\n    pass\n" * 10)
    assert run_tool(ViewTool(max_lines=10), "small.py").data["kind"] == "outline"
    assert run_tool(ViewTool(max_bytes=50), "small.py").data["kind"] == "outline"
    assert run_tool(ViewTool(), "small.py").data["kind"] == "file"


def test_a_big_file_without_symbols_shows_its_head(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    write(tool_ctx.workspace, "log.txt", "".join(f"entry {i}\n" for i in range(1, 1001)))
    result = run_tool(ViewTool(), "log.txt")
    lines = result.output.splitlines()
    assert numbers("\n".join(lines[:-1])) == list(range(1, 601))
    assert lines[-1] == (
        "… log.txt: 1,000 lines; showing lines 1-600. Use view log.txt:START-END for more"
    )


# --- ranges -------------------------------------------------------------------------


@pytest.fixture
def hundred(tool_ctx: ToolContext) -> Path:
    return write(tool_ctx.workspace, "h.txt", "".join(f"line {i}\n" for i in range(1, 101)))


def test_line_ranges(hundred: Path, run_tool: RunTool) -> None:
    result = run_tool(ViewTool(), "h.txt:10-12")
    assert result.output == "  10│ line 10\n  11│ line 11\n  12│ line 12"
    assert result.data == {"path": "h.txt", "kind": "range", "start": 10, "end": 12, "lines": 100}
    assert numbers(run_tool(ViewTool(), "h.txt", "10-12").output) == [10, 11, 12]
    assert numbers(run_tool(ViewTool(), "h.txt:98-").output) == [98, 99, 100]


def test_a_single_line_shows_its_context(hundred: Path, run_tool: RunTool) -> None:
    assert numbers(run_tool(ViewTool(), "h.txt:50").output) == list(range(40, 61))
    assert numbers(run_tool(ViewTool(context=2), "h.txt:2").output) == [1, 2, 3, 4]


def test_ranges_past_the_end(hundred: Path, run_tool: RunTool) -> None:
    clipped = run_tool(ViewTool(), "h.txt:99-150")
    assert clipped.output == "  99│ line 99\n 100│ line 100\n(end of file: h.txt has 100 lines)"
    past = run_tool(ViewTool(), "h.txt:200-210")
    assert past.status is ResultStatus.ERROR
    assert past.error == "line 200 is past the end of h.txt (h.txt has 100 lines)"
    backwards = run_tool(ViewTool(), "h.txt:20-10")
    assert backwards.status is ResultStatus.ERROR
    (hundred.parent / "d").mkdir()
    assert run_tool(ViewTool(), "d:1-2").error == "d is a directory; a line range needs a file"


# --- directories ----------------------------------------------------------------------


def test_directory_tree_honours_gitignore(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    root = tool_ctx.workspace
    write(root, ".gitignore", "node_modules/\n*.log\n")
    write(root, "node_modules/pkg/index.js", "x")
    write(root, "debug.log", "x")
    write(root, "src/app.py", "x")
    write(root, "src/lib/util.py", "x")
    write(root, "src/lib/.gitignore", "secret.py\n")
    write(root, "src/lib/secret.py", "x")
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(root, "README.md", "x")
    result = run_tool(ViewTool(), ".")
    assert result.output == "\n".join([
        "./ (5 files)",
        "  src/",
        "    lib/",
        "      .gitignore",
        "      util.py",
        "    app.py",
        "  .gitignore",
        "  README.md",
    ])  # fmt: skip
    sub = run_tool(ViewTool(), "src/lib")
    assert sub.output == "src/lib/ (2 files)\n  .gitignore\n  util.py"


def test_directory_tree_collapses_deep_levels_to_fit(
    tool_ctx: ToolContext, run_tool: RunTool
) -> None:
    for d in range(3):
        for f in range(20):
            write(tool_ctx.workspace, f"pkg{d}/deep/f{f}.py", "x")
    result = run_tool(ViewTool(max_entries=10), ".")
    assert result.output == "\n".join([
        "./ (60 files)",
        "  pkg0/",
        "    deep/ (20 files)",
        "  pkg1/",
        "    deep/ (20 files)",
        "  pkg2/",
        "    deep/ (20 files)",
        "(directories below depth 2 collapsed; view DIR to open one)",
    ])  # fmt: skip


def test_directory_tree_caps_a_wide_level(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    for f in range(30):
        write(tool_ctx.workspace, f"f{f:02}.txt", "x")
    lines = run_tool(ViewTool(max_entries=10), ".").output.splitlines()
    assert lines[0] == "./ (30 files)" and lines[1] == "  f00.txt"
    assert len(lines) == 12
    assert lines[-1] == (
        "… 20 more entries; view DIR/NAME opens one, grep -l PATTERN . searches them all"
    )


# --- skeleton --------------------------------------------------------------------------

# (file, a line the skeleton must hold)
SKELETON_LINES = [
    ("sample.py", "16-20    def add(self, name: str, count: int = 1) -> None:"
                  "  # Add `count` of `name`."),
    ("sample.js", " 9-13    on(event, handler)"),
    ("sample.ts", "20-26    push(job: T): boolean"),
    ("sample.go", "24-30  func (s *Server) Start(ctx context.Context) error"
                  "  # Start begins accepting connections."),
    ("sample.rs", "17-19    pub fn distance(&self, other: &Point) -> f64"),
    ("sample.java", "15-20    public void deposit(long cents)"),
    ("sample.c", "20-27  int stack_push(struct stack *s, int value)"),
    ("sample.cpp", "12-14      double area() const"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "line"), SKELETON_LINES, ids=[t[0] for t in SKELETON_LINES])
def test_skeleton_of_each_language(samples: Path, run_tool: RunTool, name: str, line: str) -> None:
    result = run_tool(SkeletonTool(), name)
    assert result.ok, result.error
    assert line in result.output.splitlines()
    source_lines = (samples / name).read_text(encoding="utf-8").count("\n")
    assert len(result.output.splitlines()) < source_lines / 2


def test_skeleton_of_a_symbol_and_of_a_directory(
    samples: Path, run_tool: RunTool, tool_ctx: ToolContext
) -> None:
    report = run_tool(SkeletonTool(), "sample.py/Inventory/Report")
    assert report.output == (
        "26-31  class Report:  # A printable summary.\n"
        "29-31    def render(self, inventory: Inventory) -> str:"
    )
    write(samples, ".gitignore", "sample.c\n")
    write(samples, "notes.md", "# not code\n")
    tree = run_tool(SkeletonTool(), ".").output.splitlines()
    headers = [line for line in tree if not line.startswith(" ")]
    assert headers == ["sample.cpp", "sample.go", "sample.java", "sample.js", "sample.py",
                       "sample.rs", "sample.ts"]  # fmt: skip
    start = "  24-30  func (s *Server) Start(ctx context.Context) error"
    assert f"{start}  # Start begins accepting connections." in tree
    capped = run_tool(SkeletonTool(max_symbols=3), ".").output.splitlines()
    assert capped[-1] == "… more symbols in 7 more files; next page: skeleton . --offset 3"


def test_skeleton_errors(samples: Path, run_tool: RunTool, tool_ctx: ToolContext) -> None:
    write(samples, "notes.md", "# not code\n")
    unsupported = run_tool(SkeletonTool(), "notes.md")
    assert unsupported.status is ResultStatus.ERROR
    assert unsupported.error is not None and unsupported.error.startswith("cannot outline notes.md")
    write(samples, "empty.py", "import os\n")
    assert run_tool(SkeletonTool(), "empty.py").output == "empty.py: no classes or functions"


# --- errors and escapes -------------------------------------------------------------------


def test_missing_file_suggests_close_names(samples: Path, run_tool: RunTool) -> None:
    result = run_tool(ViewTool(), "sampel.py")
    assert result.status is ResultStatus.ERROR
    assert result.error is not None
    assert result.error.startswith("no such file or directory: sampel.py (did you mean sample.py")
    write(samples, "deep/er/config.toml", "x = 1\n")
    elsewhere = run_tool(ViewTool(), "config.toml")
    assert elsewhere.error == (
        "no such file or directory: config.toml (did you mean deep/er/config.toml?)"
    )
    assert run_tool(ViewTool(), "zzz.qq").error == "no such file or directory: zzz.qq"


def test_usage_errors(samples: Path, run_tool: RunTool) -> None:
    result = run_tool(ViewTool(), "a.py", "b.py")
    assert result.status is ResultStatus.ERROR
    assert result.error is not None and result.error.startswith("view takes one path")


@pytest.fixture
def outside(tool_ctx: ToolContext) -> Path:
    """A secret next to the workspace, and symlinks inside the workspace pointing at it."""
    secret = tool_ctx.workspace.parent / "secret.txt"
    secret.write_text("TOP SECRET\n", encoding="utf-8")
    os.symlink(secret, tool_ctx.workspace / "link.txt")
    os.symlink(tool_ctx.workspace.parent, tool_ctx.workspace / "up")
    return secret


@pytest.mark.parametrize(
    "spec",
    ["../../etc/passwd", "/etc/passwd", "../secret.txt", "link.txt", "up/secret.txt",
     "link.txt:1-2", "up/secret.txt/Symbol", "~/.ssh/id_rsa", "sub/../../secret.txt"],
)  # fmt: skip
@pytest.mark.parametrize("tool", [ViewTool(), SkeletonTool()], ids=["view", "skeleton"])
def test_escapes_are_blocked(
    outside: Path, run_tool: RunTool, spec: str, tool: ViewTool | SkeletonTool
) -> None:
    result = run_tool(tool, spec)
    assert result.status is ResultStatus.BLOCKED, result
    assert "TOP SECRET" not in result.output
    assert result.error is not None and result.error.startswith("refused")


def test_trees_do_not_follow_symlinks_outside(outside: Path, run_tool: RunTool) -> None:
    result = run_tool(ViewTool(), ".")
    assert "secret" not in result.output


# --- an editor's buffers (`normalize acp`) -------------------------------------


def test_an_editors_unsaved_buffer_is_shown_and_said(tool_ctx: ToolContext,
                                                      run_tool: RunTool) -> None:
    write(tool_ctx.workspace, "a.py", "one\ntwo\n")
    write(tool_ctx.workspace, "same.py", "same\n")
    asked: list[Path] = []

    def buffers(path: Path) -> str | None:
        asked.append(path)
        return {"a.py": "one\nTWO, unsaved\nthree\n", "same.py": "same\n"}.get(path.name)

    view = ViewTool(buffers=buffers)
    whole = run_tool(view, "a.py")
    assert whole.output.startswith("   1│ one\n   2│ TWO, unsaved\n   3│ three\n")
    assert "unsaved buffer of a.py" in whole.output and whole.data["buffer"] is True
    ranged = run_tool(view, "a.py:3-3")
    assert ranged.output.startswith("   3│ three\n") and "unsaved buffer" in ranged.output
    same = run_tool(view, "same.py")  # the buffer is the disk's text: nothing to say
    assert same.output == "   1│ same" and "buffer" not in same.data
    write(tool_ctx.workspace, "b.py", "disk\n")
    assert run_tool(view, "b.py").output == "   1│ disk"  # no buffer: the disk
    assert [p.name for p in asked] == ["a.py", "a.py", "same.py", "b.py"]
    assert (tool_ctx.workspace / "a.py").read_text() == "one\ntwo\n"
