"""Where `for_each` gets its items: a list variable, `files:GLOB`, `lines:TEXT`, or a plugin.

A plugin source (entry-point group `normalize.sources`) is a callable
`(argument, workspace, variables) -> list[str]`, used as `name:argument`.
Built-in plugins: `code:DIR` (source files in a language normalize can
outline) and `py:NAME` (a Python callable registered by a Python workflow).
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



def _builtin_sources() -> dict[str, str]:
    return {"code": "normalize.workflow.sources:code_files",
            "py": "normalize.workflow.flow:python_source"}


SOURCES: PluginGroup[SourceFn] = PluginGroup("normalize.sources", _builtin_sources)


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


def code_files(argument: str, workspace: Path, variables: Mapping[str, Any]) -> list[str]:
    """`code:DIR`: files under DIR (git-ignored ones left out) in a language with an outline."""
    del variables
    from normalize.tools.code.grammars import language_for

    root = workspace.resolve()
    start = (root / argument.strip()).resolve()
    if not start.is_relative_to(root):
        raise ConfigError(f"for_each code:{argument}: outside the workspace")
    if not start.exists():
        raise ConfigError(f"for_each code:{argument}: no such directory in the workspace")
    return [path.relative_to(root).as_posix() for path in walk(root, start)
            if language_for(path) is not None]


def resolve_items(source: str, workspace: Path, variables: Mapping[str, Any]) -> list[Any]:
    """The items a `for_each` source names."""
    kind, sep, arg = source.partition(":")
    if sep and kind == "files":
        return glob_files(interpolate(arg, variables), workspace)
    if sep and kind == "lines":
        return [ln.strip() for ln in interpolate(arg, variables).splitlines() if ln.strip()]
    if sep and kind in SOURCES:
        try:
            source_fn = SOURCES.get(kind)
        except KeyError:
            why = "; ".join(w for w in SOURCES.warnings if f"plugin {kind!r}" in w)
            raise ConfigError(f"for_each {source!r}: {why or 'no such source'}") from None
        return list(source_fn(interpolate(arg, variables), workspace, variables))
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
