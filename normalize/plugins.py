"""Registries filled the same way for built-ins and third-party plugins.

A `PluginGroup` maps names to objects. Built-ins are listed as
`module:attribute` strings and imported on first use; plugins come from an
entry-point group. A plugin that fails to import becomes a warning, never a
crash; `normalize plugins` shows both, and `unknown(name)` names the failure.

Where the entry points come from is one seam: `use_entry_points` replaces the
installed distributions' entry points with a given table (tests, embedding
programs), so a registry sees exactly the plugins its caller chose.
"""

from __future__ import annotations

import importlib
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")


class PluginInfo(NamedTuple):
    """Where a registered name comes from."""

    group: str
    name: str
    target: str
    origin: str  # "builtin", "plugin:DIST", "runtime"


class EntryPoint(NamedTuple):
    """One advertised plugin: its name, `module:attr` target and distribution."""

    name: str
    target: str
    dist: str = "?"


EntryPointSource = Callable[[str], list[EntryPoint]]
"""Gives the entry points of one group (the installed ones, or a test's table)."""


def installed_entry_points(group: str) -> list[EntryPoint]:
    """The entry points the installed distributions advertise for `group`.

    Read as `importlib.metadata` reads them, for a fraction of its cost (it
    loads and parses every distribution's metadata: ~20 ms at each run's
    start): the `entry_points.txt` of each dist-info and egg-info directory on
    sys.path, a distribution found twice counted where it comes first, and
    the distribution's name from its metadata's `Name:` header. The files are
    read once per process, every group at once, while sys.path stays as it
    was (`reset_all` reads them again).
    """
    found: list[EntryPoint] = []
    for directory, groups in _installed():
        points = groups.get(group)
        if points:
            dist = _dist_names.get(directory)
            if dist is None:
                dist = _dist_names[directory] = _dist_name(directory) or "?"
            found += [EntryPoint(name, target, dist) for name, target in points]
    return found


Advertised = list[tuple[str, dict[str, list[tuple[str, str]]]]]  # (dist-info, group → points)
_scanned: tuple[tuple[str, ...], Advertised] | None = None
_dist_names: dict[str, str] = {}


def _installed() -> Advertised:
    """Each distribution's directory and its entry points, by group (read once, see above)."""
    global _scanned
    path = tuple(sys.path)
    if _scanned is None or _scanned[0] != path:
        _scanned = (path, _scan())
    return _scanned[1]


def _scan() -> Advertised:
    found: Advertised = []
    seen: set[str] = set()
    for entry in sys.path:
        try:
            dirs = [d for d in os.scandir(entry or ".")
                    if d.name.endswith((".dist-info", ".egg-info")) and d.is_dir()]
        except OSError:
            continue
        for directory in dirs:
            key = _dist_key(directory.name)
            if key in seen:
                continue
            seen.add(key)
            groups = _groups_of(directory.path)
            if groups:
                found.append((directory.path, groups))
    return found


def _dist_key(directory: str) -> str:
    """A distribution's name as importlib.metadata compares it, from its directory's name."""
    stem = directory.rsplit(".", 1)[0].split("-", 1)[0]
    return "_".join(part for part in stem.replace("-", "_").replace(".", "_").split("_")
                    if part).lower()


def _groups_of(directory: str) -> dict[str, list[tuple[str, str]]]:
    """The (name, target) pairs of each group in a distribution's `entry_points.txt`."""
    try:
        with open(os.path.join(directory, "entry_points.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    groups: dict[str, list[tuple[str, str]]] = {}
    points: list[tuple[str, str]] | None = None
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            points = groups.setdefault(line[1:-1], []) if line.endswith("]") else None
        elif points is not None and "=" in line and not line.startswith(("#", ";")):
            name, target = line.split("=", 1)
            points.append((name.strip(), target.strip()))
    return {group: points for group, points in groups.items() if points}


def _dist_name(directory: str) -> str | None:
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Name:"):
                        return line[5:].strip()
                    if not line.strip():
                        break  # the end of the headers
        except OSError:
            continue
    return None


def advertised_names(group: str) -> list[str]:
    """The names advertised for `group`, by the installed distributions or a test's table."""
    return sorted({ep.name for ep in _source(group)})


_source: EntryPointSource = installed_entry_points
_groups: weakref.WeakSet[PluginGroup[Any]] = weakref.WeakSet()


@contextmanager
def use_entry_points(table: Mapping[str, Mapping[str, str]], *,
                     dist: str = "injected") -> Iterator[None]:
    """Within the block, the entry points are `table` (group → name → target), nothing else."""
    global _source
    previous = _source
    points = {group: [EntryPoint(name, target, dist) for name, target in names.items()]
              for group, names in table.items()}
    _source = lambda group: list(points.get(group, []))  # noqa: E731
    reset_all()
    try:
        yield
    finally:
        _source = previous
        reset_all()


def reset_all() -> None:
    """Make every registry read its entry points again (after sys.path changed)."""
    global _scanned
    _scanned = None
    _dist_names.clear()
    for group in list(_groups):
        group.reset()


def load_target(target: str) -> object:
    """Import `module:attr.path`."""
    module_name, _, attr = target.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class PluginGroup(Generic[T]):
    """Name → object for one entry-point group, loaded lazily."""

    def __init__(self, group: str, builtins: Callable[[], dict[str, str]]) -> None:
        self.group = group
        self._builtins = builtins
        self._targets: dict[str, PluginInfo] | None = None
        self._loaded: dict[str, T] = {}
        self._runtime: dict[str, T] = {}
        self.warnings: list[str] = []
        self.failures: dict[str, str] = {}  # name → why it failed to load
        _groups.add(self)

    def reset(self) -> None:
        """Forget what was read and loaded (run-time registrations stay)."""
        self._targets = None
        self._loaded = {}
        self.warnings = []
        self.failures = {}

    def _index(self) -> dict[str, PluginInfo]:
        if self._targets is None:
            targets = {
                name: PluginInfo(self.group, name, target, "builtin")
                for name, target in self._builtins().items()
            }
            try:
                found = _source(self.group)
            except Exception as exc:  # a broken installed distribution
                self.warnings.append(f"{self.group}: cannot read entry points: {exc}")
                found = []
            for ep in found:
                targets[ep.name] = PluginInfo(self.group, ep.name, ep.target, f"plugin:{ep.dist}")
            for name, obj in self._runtime.items():
                targets[name] = PluginInfo(self.group, name, repr(obj), "runtime")
                self._loaded[name] = obj
            self._targets = targets
        return self._targets

    def register(self, name: str, obj: T) -> None:
        """Register an object at run time (tests, embedding programs)."""
        self._runtime[name] = obj
        self._index()[name] = PluginInfo(self.group, name, repr(obj), "runtime")
        self._loaded[name] = obj

    def names(self) -> list[str]:
        return sorted(self._index())

    def infos(self) -> list[PluginInfo]:
        return [self._index()[n] for n in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._index()

    def get(self, name: str) -> T:
        """The object registered as `name`; KeyError when unknown or broken."""
        if name in self._loaded:
            return self._loaded[name]
        info = self._index()[name]
        try:
            obj: T = load_target(info.target)  # type: ignore[assignment]
        except Exception as exc:
            self.failures[name] = f"{type(exc).__name__}: {exc}"
            message = f"{self.group}: plugin {name!r} ({info.target}) failed to load: {exc}"
            if message not in self.warnings:
                self.warnings.append(message)
            raise KeyError(name) from exc
        self._loaded[name] = obj
        return obj

    def load_all(self) -> dict[str, T]:
        """Every object that loads; failures are recorded in `warnings`."""
        out: dict[str, T] = {}
        for name in self.names():
            try:
                out[name] = self.get(name)
            except KeyError:
                continue
        return out

    def unknown(self, name: str, noun: str) -> str:
        """Why `name` cannot be had: a plugin's import error, or the names that exist."""
        self.load_all()
        known = ", ".join(n for n in self.names() if n not in self.failures) or "none"
        message = f"unknown {noun} {name!r}"
        if name in self.failures:
            info = self._index()[name]
            message += (f": the plugin {info.target} ({info.origin}) failed to load: "
                        f"{self.failures[name]}")
        elif self.failures:
            broken = "; ".join(f"{n} ({self._index()[n].target}): {why}"
                               for n, why in sorted(self.failures.items()))
            message += f" (plugins that failed to load: {broken})"
        return f"{message} (known: {known})"
