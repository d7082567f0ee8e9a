"""Registries filled the same way for built-ins and third-party plugins.

A `PluginGroup` maps names to objects. Built-ins are listed as
`module:attribute` strings and imported on first use; plugins come from an
entry-point group. A plugin that fails to import becomes a warning, never a
crash; `normalize plugins` shows both.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class PluginInfo:
    """Where a registered name comes from."""

    group: str
    name: str
    target: str
    origin: str  # "builtin", "plugin:DIST", "runtime"


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
        self.warnings: list[str] = []

    def _index(self) -> dict[str, PluginInfo]:
        if self._targets is None:
            targets = {
                name: PluginInfo(self.group, name, target, "builtin")
                for name, target in self._builtins().items()
            }
            from importlib.metadata import entry_points

            try:
                found = entry_points(group=self.group)
            except Exception as exc:  # a broken installed distribution
                self.warnings.append(f"{self.group}: cannot read entry points: {exc}")
                found = ()  # type: ignore[assignment]
            for ep in found:
                dist = getattr(ep.dist, "name", "?") if ep.dist else "?"
                targets[ep.name] = PluginInfo(self.group, ep.name, ep.value, f"plugin:{dist}")
            self._targets = targets
        return self._targets

    def register(self, name: str, obj: T) -> None:
        """Register an object at run time (tests, embedding programs)."""
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
