"""The repo map a driver is lent: a light maker, so a run that never asks loads no code tools.

`tools.code` (outlines, languages, the repo map's builder) is loaded the first
time a driver asks for a map of some size, not when the run is set up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def repo_maps(root: Path, cache_dir: Path, *, redact: Callable[[str], str] | None = None
              ) -> Callable[[int], Callable[[], str]]:
    """What a driver is lent as its repo map: given N tokens, the cached map of `root`'s text."""

    def make(tokens: int) -> Callable[[], str]:
        from normalize.tools.code.mapcache import CachedRepoMap

        return CachedRepoMap(root, tokens, cache_dir, redact=redact).text

    return make


__all__ = ["repo_maps"]
