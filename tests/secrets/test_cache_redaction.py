"""The result cache keeps and previews redacted text, whatever its strategy."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from secret_shapes import KEY

from normalize.execution.cache import make_cache
from normalize.redact import REDACTED, Redactor

LONG = "\n".join([f"line {i}" for i in range(40)] + [f"ANTHROPIC_API_KEY={KEY}",
                                                      "DEPLOY=plain-value-2024"])


@pytest.mark.parametrize("strategy", ["none", "memory", "persistent"])
def test_previews_and_kept_results_are_redacted(tmp_path: Path, strategy: str) -> None:
    cache = make_cache(strategy, directory=tmp_path / "cache",
                       redact=Redactor(["plain-value-2024"]).redact)
    preview, cache_id = cache.preview(LONG)
    short, _ = cache.preview(f"key {KEY}")
    assert KEY not in preview + short and short == f"key {REDACTED}"
    if cache_id is not None:
        kept = cache.retrieve(cache_id) or ""
        assert KEY not in kept and "plain-value-2024" not in kept
        assert f"ANTHROPIC_API_KEY={REDACTED}" in kept
    if strategy == "persistent":
        for path in [tmp_path / "cache", *(tmp_path / "cache").iterdir()]:
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
        assert KEY not in "".join(p.read_text() for p in (tmp_path / "cache").iterdir())


def test_a_cache_made_without_a_redactor_still_knows_the_shapes(tmp_path: Path) -> None:
    cache = make_cache("persistent", directory=tmp_path)
    cache_id = cache.store(LONG)
    assert KEY not in (cache.retrieve(cache_id) or "x" + KEY)
