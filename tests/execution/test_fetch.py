"""The `fetch` tool over each cache strategy, and the preview → fetch round trip."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from normalize.errors import ToolError
from normalize.execution.cache import MemoryCache, NoCache, PersistentCache
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.fetch import FetchTool

MakeContext = Callable[..., ToolContext]
LONG = "\n".join(f"line {i}" for i in range(1, 2001))


class Emit:
    """A tool double that prints a fixed long text."""

    name: ClassVar[str] = "emit"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "prints a long text"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        return ActionResult.success(LONG)


def fetch(ctx: ToolContext, *args: str) -> ActionResult:
    return FetchTool().run(Action("fetch", {"args": list(args)}), ctx)


def test_a_long_result_is_previewed_and_fetched_whole(make_ctx: MakeContext) -> None:
    ctx = make_ctx()
    result = ToolRegistry([Emit()]).execute(Action("emit"), ctx)
    assert result.cache_id == "r1"
    assert result.preview.splitlines()[-1] == "… 1981 more lines — fetch r1"
    fetched = fetch(ctx, "r1")
    assert fetched.ok
    assert fetched.output == LONG


def test_fetch_a_line_range(make_ctx: MakeContext) -> None:
    ctx = make_ctx()
    cache_id = ctx.cache.store(LONG)
    assert fetch(ctx, cache_id, "10-12").output == "line 10\nline 11\nline 12"
    assert fetch(ctx, f"{cache_id}:1999-").output == "line 1999\nline 2000"
    assert fetch(ctx, cache_id, "5").output == "line 5"
    assert fetch(ctx, cache_id, "1990-5000").data == {
        "cache_id": cache_id, "lines": 2000, "start": 1990, "end": 2000,
    }


def test_fetch_after_resume_in_a_new_process(tmp_path: Path, make_ctx: MakeContext) -> None:
    directory = tmp_path / ".data" / "tasks" / "t1" / "cache"
    cache_id = PersistentCache(directory).preview(LONG)[1]
    assert cache_id is not None
    ctx = make_ctx(PersistentCache(directory))
    assert fetch(ctx, cache_id).output == LONG


@pytest.mark.parametrize(
    ("cache", "why"),
    [
        (MemoryCache(ttl_seconds=600), "results are kept for 10 min after their last use"),
        (NoCache(), "caching is off"),
    ],
)
def test_an_unknown_id_says_how_long_results_are_kept(
    make_ctx: MakeContext, cache: MemoryCache | NoCache, why: str
) -> None:
    with pytest.raises(ToolError) as err:
        fetch(make_ctx(cache), "r9")
    assert str(err.value) == f"no cached result r9 ({why})"


@pytest.mark.parametrize(
    "args", [[], ["../../etc/passwd"], ["r1", "b-a"], ["r1", "5-2"], ["r1", "0-3"]]
)
def test_bad_arguments_are_tool_errors(make_ctx: MakeContext, args: list[str]) -> None:
    ctx = make_ctx()
    ctx.cache.store(LONG)
    with pytest.raises(ToolError):
        fetch(ctx, *args)
