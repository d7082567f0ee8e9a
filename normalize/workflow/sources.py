"""Where `for_each` gets its items: a list variable, `files:GLOB`, `lines:TEXT`, or a plugin.

A plugin source (entry-point group `normalize.sources`) is a callable
`(argument, workspace, variables) -> list[str]`, used as `name:argument`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.plugins import PluginGroup
from normalize.tools.files import walk
from normalize.workflow.interpolate import interpolate

SourceFn = Callable[[str, Path, Mapping[str, Any]], list[Any]]

SOURCES: PluginGroup[SourceFn] = PluginGroup("normalize.sources", dict)


@lru_cache(maxsize=128)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a gitignore-free glob over posix paths: `**` spans directories."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_files(pattern: str, workspace: Path) -> list[str]:
    """Files under the workspace matching `pattern` (relative, git-ignored ones left out)."""
    pattern = pattern.removeprefix("./")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    regex = glob_regex(pattern)
    root = workspace.resolve()
    return [rel for path in walk(root) if regex.match(rel := path.relative_to(root).as_posix())]


def resolve_items(source: str, workspace: Path, variables: Mapping[str, Any]) -> list[Any]:
    """The items a `for_each` source names."""
    kind, sep, arg = source.partition(":")
    if sep and kind == "files":
        return glob_files(interpolate(arg, variables), workspace)
    if sep and kind == "lines":
        return [ln.strip() for ln in interpolate(arg, variables).splitlines() if ln.strip()]
    if sep and kind in SOURCES:
        return list(SOURCES.get(kind)(interpolate(arg, variables), workspace, variables))
    name = source.strip("{}")
    if name in variables:
        value = variables[name]
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return [ln.strip() for ln in value.splitlines() if ln.strip()]
        raise ConfigError(f"for_each: variable {name!r} is not a list")
    raise ConfigError(f"for_each: unknown source {source!r} (a list variable, files:GLOB, "
                      f"lines:TEXT, or a plugin)")
