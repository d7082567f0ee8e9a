"""bench/tokens.py at 12 turns: task_tree and flat prompts stay bounded; conversation grows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tokens.py"
SDIST_CACHE = BENCH.parents[1] / ".ci" / "cache"  # filled by .ci/run, ignored by git


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tokens", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tokens"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    bench = load_bench()
    return {row["strategy"]: row for row in bench.token_table(12)}


def test_every_strategy_ran_the_whole_script(rows: dict[str, dict[str, Any]]) -> None:
    assert set(rows) == {"task_tree", "task_list", "flat", "conversation", "none"}
    assert all(row["turns"] == 12 for row in rows.values())


def test_task_tree_prompts_stay_bounded(rows: dict[str, dict[str, Any]]) -> None:
    tree = rows["task_tree"]
    assert tree["last"] <= 1.5 * tree["first"]
    # no upward trend: the second half of the run is no bigger than the first half
    series = tree["per_turn"]
    assert max(series[6:]) <= 1.15 * max(series[:6])
    assert tree["total"] < rows["conversation"]["total"]


def test_flat_is_bounded_and_conversation_grows(rows: dict[str, dict[str, Any]]) -> None:
    flat, conversation = rows["flat"]["per_turn"], rows["conversation"]["per_turn"]
    assert max(flat[6:]) <= 1.15 * max(flat[:6])
    assert conversation == sorted(conversation)  # every turn adds to the prompt
    # the history alone adds over twice the first prompt (its stable prefix included)
    assert conversation[-1] - conversation[0] >= 1.8 * conversation[0]
    assert rows["none"]["first"] == rows["none"]["last"]


def test_task_files_stay_small_under_bounded_strategies(
        rows: dict[str, dict[str, Any]]) -> None:
    assert rows["task_tree"]["task_file_bytes"] < rows["conversation"]["task_file_bytes"]


def test_markdown_tables(rows: dict[str, dict[str, Any]]) -> None:
    bench = sys.modules["bench_tokens"]
    table = bench.markdown_table(list(rows.values()))
    assert table.splitlines()[0].startswith("| strategy | first turn | last turn |")
    assert "| `task_tree` |" in table and "| 100% |" in table
    assert len(bench.per_turn_table(list(rows.values())).splitlines()) == 2 + 12


def test_the_review_story_meets_its_targets_under_task_tree(tmp_path: Path) -> None:
    """30 steps on h11's real sdist through the SDK: ≤ 31 requests, ≤ 80k tokens, flat."""
    bench = sys.modules.get("bench_tokens") or load_bench()
    name, version = bench.REVIEW_PACKAGE
    sdist = SDIST_CACHE / f"{name}-{version}.tar.gz"  # tests never download: .ci/run does
    if not sdist.is_file():
        pytest.skip(f"{sdist.name} is not in {SDIST_CACHE} (.ci/run downloads it: "
                    f"pip download --no-deps --no-binary :all: {name}=={version} -d DIR)")
    assert len(bench.review_script()) == 30
    (row,) = bench.review_table(("task_tree",), cache=sdist.parent)
    assert row["requests"] == 30  # one request per step: no view-then-fetch
    assert row["total"] <= 80_000
    assert row["last"] <= 1.5 * row["first"]
    assert row["cost_usd"] > 0
