"""`skeleton`: pages that add up to the whole, a way on after every cut, structured symbols."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from normalize.task import ActionResult, ResultStatus
from normalize.tools.base import ToolContext
from normalize.tools.skeleton import SkeletonTool

CODE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"
RunTool = Callable[..., ActionResult]
NEXT = re.compile(r"next page: skeleton (?P<spec>\S+) --offset (?P<offset>\d+)$")


def pages(run_tool: RunTool, spec: str, limit: int) -> list[ActionResult]:
    """Follow every "next page" hint from the first page to the last."""
    tool = SkeletonTool(max_symbols=limit)
    got = [run_tool(tool, spec)]
    while match := NEXT.search(got[-1].output.splitlines()[-1]):
        assert match["spec"] == spec
        got.append(run_tool(tool, spec, "--offset", match["offset"]))
        assert len(got) < 100
    return got


def test_a_file_pages_through_every_symbol(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    shutil.copy(CODE_FIXTURES / "real" / "click_core.py", tool_ctx.workspace / "core.py")
    whole = run_tool(SkeletonTool(max_symbols=10_000), "core.py")
    total = whole.data["symbols"]
    assert total > 100 and whole.data["shown"] == total
    got = pages(run_tool, "core.py", 50)
    assert len(got) == -(-total // 50)
    assert got[0].output.splitlines()[-1] == (
        f"… {total - 50:,} more symbols; next page: skeleton core.py --offset 50"
    )
    assert got[1].output.splitlines()[0] == f"(symbols 51-100 of {total})"
    items = [item for page in got for item in page.data["items"]]
    assert items == whole.data["items"]
    limited = run_tool(SkeletonTool(), "core.py", "--offset", "10", "--limit", "5")
    assert [i["start"] for i in limited.data["items"]] == [
        i["start"] for i in whole.data["items"][10:15]
    ]


def test_json_items_are_structured_symbols(samples: Path, run_tool: RunTool) -> None:
    result = run_tool(SkeletonTool(), "sample.go")
    start = next(i for i in result.data["items"] if i["name"] == "Start")
    assert start == {
        "kind": "method", "name": "Start", "parent": "Server", "start": 24, "end": 30,
        "signature": "func (s *Server) Start(ctx context.Context) error",
        "doc": "Start begins accepting connections.", "doc_line": 23,
    }  # fmt: skip
    nested = run_tool(SkeletonTool(), "sample.py").data["items"]
    add = next(i for i in nested if i["name"] == "add")
    assert add["parent"] == "Inventory" and add["kind"] == "method"


def test_a_directory_pages_through_every_file(samples: Path, run_tool: RunTool) -> None:
    whole = run_tool(SkeletonTool(max_symbols=10_000), ".")
    got = pages(run_tool, ".", 7)
    assert len(got) > 3
    items = [item for page in got for item in page.data["items"]]
    assert items == whole.data["items"]
    assert {i["path"] for i in items} >= {"sample.py", "sample.go", "sample.rs"}


def test_files_skipped_for_size_are_reported(samples: Path, run_tool: RunTool) -> None:
    (samples / "huge.py").write_text("def f():\n    pass\n" * 2000, encoding="utf-8")
    result = run_tool(SkeletonTool(max_file_bytes=10_000), ".")
    assert result.data["skipped_large"] == ["huge.py"]
    assert result.output.splitlines()[-1] == (
        "(not outlined, over 10,000 bytes or binary: huge.py)"
    )


def test_bad_paging_arguments_are_one_line_errors(samples: Path, run_tool: RunTool) -> None:
    for args, error in [
        (("--limit", "0"), "skeleton --limit needs a positive number, not '0'"),
        (("--offset", "x"), "skeleton --offset needs a number, not 'x'"),
        (("--deep",), "unknown skeleton option --deep"),
        (("--offset", "999"), "sample.go has 7 symbols; --offset 999 is past the end"),
    ]:
        result = run_tool(SkeletonTool(), "sample.go", *args)
        assert result.status is ResultStatus.ERROR
        assert (result.error or "").startswith(error), result.error


def test_a_repository_skeleton_is_one_fast_pass(tool_ctx: ToolContext, run_tool: RunTool) -> None:
    source = Path(__file__).resolve().parents[2] / "normalize"
    shutil.copytree(source, tool_ctx.workspace / "normalize")
    started = time.perf_counter()
    result = run_tool(SkeletonTool(max_symbols=100_000), ".")
    elapsed = time.perf_counter() - started
    assert result.data["files"] > 100 and result.data["shown"] > 1000
    assert "next page" not in result.output
    assert elapsed < 10, elapsed  # ~0.5 s unloaded; generous for a shared CI machine
