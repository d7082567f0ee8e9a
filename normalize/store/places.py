"""Where a task's run keeps things in the data home, and what no program of it may touch.

The runner asks the store once per run (`TaskStore.places`) and hands the
paths down as plain values: the task's result cache, the repo maps every
task shares, and normalize's own data its programs may not see.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from normalize.homes import config_home, harness_root

__all__ = ["Places", "private_places"]


@dataclass(frozen=True)
class Places:
    """One run's paths in the data home."""

    cache: Path  # the task's result cache
    repo_maps: Path  # the cached repo maps, shared by every task of the store
    private: tuple[Path, ...]  # normalize's data and config: no program of the task sees them


def private_places(home: Path, workspace: Path) -> tuple[Path, ...]:
    """normalize's own data a task's tools may not touch: the data home, less the workspace,
    and every task's harness home (a harness turn is given its own back as writable).

    An isolated child works in a copy under the data home; everything else
    there (the tasks, the shadow stores, other copies) stays out of reach.
    """
    home, workspace = home.resolve(), workspace.resolve()
    harnesses = harness_root(home)
    around = () if harnesses == workspace or harnesses in workspace.parents else (harnesses,)
    if home not in workspace.parents:
        return (home, *around)
    hidden: list[Path] = [home / name for name in ("tasks", "shadow", "cache", "reports")]
    inside = workspace.relative_to(home)
    for depth in range(len(inside.parts)):  # each folder from the home down to the workspace
        place = home.joinpath(*inside.parts[:depth])
        with contextlib.suppress(OSError):
            hidden += [p for p in place.iterdir() if p.name != inside.parts[depth]]
    return tuple(dict.fromkeys(p for p in [*hidden, *around] if p not in workspace.parents))


def hidden_from(home: Path, workspace: Path) -> tuple[Path, ...]:
    """What no program working in `workspace` may read: the private places and the config."""
    return (*private_places(home, workspace), config_home())
