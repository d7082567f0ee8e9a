"""Fixtures for the sandbox tests: a site (workspace, outside, fake HOME) and a TCP listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import Listener, Site, make_site


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return make_site(tmp_path)


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()
