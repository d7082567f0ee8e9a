"""The programs normalize runs for itself (git, ripgrep, `true`), found by one trusted rule.

A program a task ran can write anywhere in the workspace, so a `PATH` entry
there (an activated `WS/.venv/bin`) could hand normalize a `git` of the
program's making. The rule, the only one normalize uses to find its own
helpers:

1. the system directories first, in this order: `/usr/bin`, `/bin`,
   `/usr/local/bin`, `/opt/homebrew/bin`;
2. then the entries of `PATH`, in order, keeping only an absolute path that
   lies outside every untrusted root: the workspace the call names, the data
   home and config dir (`NORMALIZE_HOME`, `NORMALIZE_CONFIG`) and the current
   directory, each compared by its real path (a link into the workspace counts
   as inside; `/` is never a root, or nothing would be left);
3. a candidate is an executable regular file whose real path is outside those
   roots as well (a system entry that links into the workspace is refused).

A lookup is made once per process for each (name, untrusted roots) pair.
`trusted_path` gives the same directories as a `PATH` value, for the
environment git itself runs in (the programs git starts through a shell, a
pager for instance, are then found by the same rule).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["SYSTEM_DIRS", "trusted_dirs", "trusted_path", "trusted_program"]

SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/local/bin", "/opt/homebrew/bin")
"""Searched first: directories only an administrator can write."""


def _roots(untrusted: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The real paths no helper may come from: the given ones, the data home, the cwd.

    The data home and config dir count when set by `NORMALIZE_HOME` /
    `NORMALIZE_CONFIG` (the platform's default lies in the person's HOME, which
    a program cannot write unless HOME is the workspace, a root already).
    """
    places: list[str | os.PathLike[str]] = [*untrusted]
    try:
        places.append(os.getcwd())
    except OSError:  # a deleted cwd: nothing to leave out
        pass
    places += [os.path.expanduser(os.environ[name]) for name in ("NORMALIZE_HOME",
               "NORMALIZE_CONFIG") if os.environ.get(name)]
    # "/" as a root (normalize started from `/` in a container) would leave out every program
    return tuple(sorted({os.path.realpath(p) for p in places} - {"/"}))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def trusted_dirs(untrusted: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
    """The directories a helper may come from, in search order (see the module's rule)."""
    return list(_dirs(_roots(untrusted), SYSTEM_DIRS, os.environ.get("PATH", "")))


@lru_cache(maxsize=64)
def _dirs(roots: tuple[str, ...], system: tuple[str, ...], path: str) -> tuple[str, ...]:
    out: list[str] = []
    for entry in [*system, *path.split(os.pathsep)]:
        if not entry or not os.path.isabs(entry):
            continue  # "" and relative entries mean the current directory
        real = os.path.realpath(entry)
        if real not in out and os.path.isdir(real) and not _inside(real, roots):
            out.append(real)
    return tuple(out)


def trusted_path(untrusted: Iterable[str | os.PathLike[str]] = ()) -> str:
    """`trusted_dirs` as a `PATH` value."""
    return os.pathsep.join(trusted_dirs(untrusted))


def trusted_program(name: str, untrusted: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """The absolute path of helper `name` found by the trusted rule, or None."""
    roots = _roots(untrusted)
    return _find(name, roots, SYSTEM_DIRS, os.environ.get("PATH", ""))


@lru_cache(maxsize=64)
def _find(name: str, roots: tuple[str, ...], system: tuple[str, ...], path: str) -> str | None:
    for directory in _dirs(roots, system, path):
        candidate = os.path.join(directory, name)
        real = os.path.realpath(candidate)
        if os.path.isfile(real) and os.access(real, os.X_OK) and not _inside(real, roots):
            return candidate
    return None
