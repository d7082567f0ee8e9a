"""The result cache: previews, strategies, and the factory."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from normalize.errors import ConfigError
from normalize.execution.cache import (
    MemoryCache,
    NoCache,
    PersistentCache,
    ResultCache,
    build_preview,
    make_cache,
)

LAST_LINE_RE = re.compile(r"^… (\d+) more lines — fetch (r\d+)$")


def pytest_like_output(total: int = 2000) -> str:
    """A long test log whose failure details sit far below the first lines."""
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-9.2.0",
    ]
    lines += [f"tests/test_mod{i}.py ........                         [{i % 100:3d}%]"
              for i in range(1200)]
    lines += [
        "=================================== FAILURES ===================================",
        "___________________________________ test_b ____________________________________",
        "    def test_b():",
        ">       assert add(1, 1) == 3",
        "E       assert 2 == 3",
        "tests/test_calc.py:7: AssertionError",
    ]
    lines += [f"captured log line {i}" for i in range(total - len(lines) - 2)]
    lines += [
        "FAILED tests/test_calc.py::test_b - assert 2 == 3",
        "========================= 1 failed, 1200 passed in 3.21s =========================",
    ]
    assert len(lines) == total
    return "\n".join(lines) + "\n"


def test_short_content_is_returned_as_is_without_an_id() -> None:
    cache = MemoryCache()
    assert cache.preview("ok\n") == ("ok\n", None)
    assert len(cache) == 0


def test_long_output_preview_shows_errors_first_then_the_head_then_the_fetch_line() -> None:
    cache = MemoryCache()
    content = pytest_like_output()
    summary, cache_id = cache.preview(content)

    assert cache_id == "r1"
    lines = summary.splitlines()
    assert lines[0].startswith("errors (")
    errors = lines[: lines.index("first lines:")]
    assert any("E       assert 2 == 3" in line for line in errors)
    assert any("FAILED tests/test_calc.py::test_b" in line for line in errors)
    # numbered, so a reader can `fetch r1 1200-1210`
    assert any(line.startswith("1207: E       assert 2 == 3") for line in errors)
    head = lines[lines.index("first lines:") + 1 : -1]
    assert "test session starts" in head[0]
    match = LAST_LINE_RE.match(lines[-1])
    assert match is not None, lines[-1]
    assert int(match.group(1)) == 2000 - len(head)
    assert match.group(2) == cache_id
    assert len(lines) <= 20
    assert len(summary) <= 2000
    assert cache.retrieve(cache_id) == content


def test_preview_is_deterministic_and_the_same_content_keeps_its_id() -> None:
    cache = MemoryCache()
    content = pytest_like_output()
    assert cache.preview(content) == cache.preview(content)
    assert cache.preview(content + "more\n")[1] == "r2"
    assert build_preview(content, "r9") == build_preview(content, "r9")


def test_preview_respects_preview_length_from_a_workflow() -> None:
    cache = make_cache("memory", preview_length=500, preview_lines=12)
    summary, cache_id = cache.preview(pytest_like_output())
    assert cache_id is not None
    assert len(summary) <= 500
    assert len(summary.splitlines()) <= 12
    assert summary.splitlines()[-1].endswith(f"— fetch {cache_id}")


def test_output_without_errors_shows_only_the_first_lines() -> None:
    content = "\n".join(f"line {i}" for i in range(100))
    summary, cache_id = MemoryCache().preview(content)
    assert summary.splitlines()[:19] == [f"line {i}" for i in range(19)]
    assert summary.splitlines()[-1] == f"… 81 more lines — fetch {cache_id}"


def test_a_few_huge_lines_mention_characters() -> None:
    content = "\n".join(["a" * 5000, "b" * 5000, "c" * 5000])
    summary, cache_id = MemoryCache().preview(content)
    last = summary.splitlines()[-1]
    assert re.fullmatch(rf"… \d+ more characters — fetch {cache_id}", last), last
    assert len(summary) <= 2000
    content = "short\n" + "\n".join("x" * 3000 for _ in range(30))
    last = MemoryCache().preview(content)[0].splitlines()[-1]
    assert re.fullmatch(r"… \d+ more lines \(\d+ more characters\) — fetch r1", last), last


def test_error_lines_inside_the_head_are_not_repeated() -> None:
    content = "Traceback (most recent call last):\nValueError: bad\n" + "\n".join(
        f"line {i}" for i in range(50)
    )
    summary, _ = MemoryCache().preview(content)
    assert summary.count("ValueError: bad") == 1
    assert not summary.startswith("errors")


def test_grep_like_output_is_not_all_flagged_as_errors() -> None:
    content = "\n".join(f"src/mod{i}.py:{i}: def handler():" for i in range(300))
    summary, _ = MemoryCache().preview(content)
    assert not summary.startswith("errors")


def test_no_cache_cuts_without_an_id_and_says_how_much() -> None:
    cache = NoCache()
    summary, cache_id = cache.preview(pytest_like_output())
    assert cache_id is None
    assert re.fullmatch(r"… \d+ more lines — not kept \(caching is off\)",
                        summary.splitlines()[-1])
    assert cache.retrieve(cache.store("x")) is None
    assert cache.preview("short") == ("short", None)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_memory_cache_expires_after_the_ttl_since_last_use() -> None:
    clock = FakeClock()
    cache = MemoryCache(ttl_seconds=60, clock=clock)
    first = cache.store("first")
    second = cache.store("second")
    clock.now += 50
    assert cache.retrieve(first) == "first"  # used: its TTL starts again
    clock.now += 20
    assert cache.retrieve(second) is None
    assert cache.retrieve(first) == "first"
    clock.now += 61
    assert cache.retrieve(first) is None
    assert "10 min" in MemoryCache(ttl_seconds=600).retention


def test_memory_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    cache = MemoryCache(max_bytes=100)
    a = cache.store("a" * 40)
    b = cache.store("b" * 40)
    cache.retrieve(a)  # b is now the least recently used
    c = cache.store("c" * 40)
    assert cache.retrieve(b) is None
    assert cache.retrieve(a) == "a" * 40
    assert cache.retrieve(c) == "c" * 40
    summary, cache_id = MemoryCache(max_bytes=1000).preview("x\n" * 600)
    assert cache_id is None
    assert "not kept (larger than the cache)" in summary


def test_memory_cache_is_thread_safe() -> None:
    cache = MemoryCache()
    ids: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(200):
            cache_id = cache.store(f"{n}-{i}")
            with lock:
                ids.append(cache_id)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 1600


def test_persistent_cache_survives_a_new_instance_and_ids_continue(tmp_path: Path) -> None:
    directory = tmp_path / "tasks" / "abc" / "cache"
    first = PersistentCache(directory)
    content = pytest_like_output()
    summary, cache_id = first.preview(content)
    other = first.store("second result")
    assert (cache_id, other) == ("r1", "r2")
    assert summary.endswith("— fetch r1")

    reopened = PersistentCache(directory)
    assert reopened.retrieve("r1") == content
    assert reopened.retrieve("r2") == "second result"
    assert reopened.store("third") == "r3"
    assert sorted(p.name for p in directory.iterdir()) == ["r1.txt", "r2.txt", "r3.txt"]


def test_persistent_cache_refuses_ids_that_are_not_ids(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("no")
    cache = PersistentCache(tmp_path / "cache")
    assert cache.retrieve("../secret") is None
    assert cache.retrieve("r1") is None  # nothing stored, directory missing


def test_persistent_cache_bound_removes_the_oldest(tmp_path: Path) -> None:
    cache = PersistentCache(tmp_path, max_bytes=100)
    first = cache.store("a" * 60)
    second = cache.store("b" * 60)
    assert cache.retrieve(first) is None
    assert cache.retrieve(second) == "b" * 60


def test_persistent_cache_keeps_text_exactly(tmp_path: Path) -> None:
    text = "héllo\r\nwörld\n\x1b[31mred\x1b[0m\n"
    cache_id = PersistentCache(tmp_path).store(text)
    assert PersistentCache(tmp_path).retrieve(cache_id) == text


@pytest.mark.parametrize(
    ("strategy", "kind"),
    [("none", NoCache), ("memory", MemoryCache), ("persistent", PersistentCache)],
)
def test_make_cache_builds_each_strategy(tmp_path: Path, strategy: str, kind: type) -> None:
    cache = make_cache(strategy, directory=tmp_path, preview_length=500, ttl_seconds=600)
    assert isinstance(cache, kind)
    assert isinstance(cache, ResultCache)


def test_make_cache_names_a_bad_strategy_and_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'memroy'"):
        make_cache("memroy")
    with pytest.raises(ConfigError, match="'preview_size'"):
        make_cache("memory", preview_size=10)
    with pytest.raises(ConfigError, match="ttl_seconds must be a number"):
        make_cache("memory", ttl_seconds="10m")
    with pytest.raises(ConfigError, match="directory"):
        make_cache("persistent")
    with pytest.raises(ConfigError, match="preview_length \\(preview_chars\\) must be at least"):
        make_cache("memory", preview_length=5)
