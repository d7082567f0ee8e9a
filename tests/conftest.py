"""Suite-wide fixtures: every test gets its own normalize data home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def normalize_home(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An isolated NORMALIZE_HOME, so no test touches the real user data dir."""
    home = tmp_path_factory.mktemp("nhome")
    monkeypatch.setenv("NORMALIZE_HOME", str(home))
    monkeypatch.delenv("NORMALIZE_CRASH_AT", raising=False)
    yield home
