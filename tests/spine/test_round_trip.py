"""Every persisted record round-trips through JSON, with values that differ from its defaults.

The classes are found, not listed: every dataclass or `msgspec.Struct` in
`normalize` that can be read back (`from_dict` / `from_json`), every event (the
journal persists them), and every record one of their fields holds. An instance is built by
walking the fields, each given a value unlike its default, so a field the
encoder or the decoder forgets fails here by name.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import pkgutil
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import pytest

import normalize
from normalize.events import BaseEvent

# modules that need an optional program or package to import are skipped, not failed
_OPTIONAL = ("normalize.execution.executors.ray",)


def _modules() -> list[types.ModuleType]:
    found = []
    for info in pkgutil.walk_packages(normalize.__path__, "normalize."):
        if info.name.startswith(_OPTIONAL) or ".cli" in info.name:
            continue
        found.append(importlib.import_module(info.name))
    return found


def _reads_back(cls: type) -> bool:
    return any(callable(getattr(cls, name, None)) for name in ("from_dict", "from_json"))


def _hints(cls: type) -> dict[str, Any]:
    # each class's own annotations are read in its own module (a subclass may live elsewhere)
    return typing.get_type_hints(cls)


def _is_record(tp: Any) -> bool:
    """A dataclass or a `msgspec.Struct` (the events are structs)."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or issubclass(tp, msgspec.Struct))


def _fields(cls: type) -> list[tuple[str, Any]]:
    """(name, default) of each field set at construction (`dataclasses.MISSING`: required)."""
    if issubclass(cls, msgspec.Struct):
        out = []
        for info in msgspec.structs.fields(cls):
            default = info.default if info.default is not msgspec.NODEFAULT else (
                info.default_factory() if info.default_factory is not msgspec.NODEFAULT
                else dataclasses.MISSING)
            out.append((info.name, default))
        return out
    return [(f.name, _default(f)) for f in dataclasses.fields(cls) if f.init]


def _nested(tp: Any) -> list[type]:
    """The records a field's type names (inside lists, unions, dicts …)."""
    if _is_record(tp):
        return [tp]
    return [cls for arg in typing.get_args(tp) for cls in _nested(arg)]


def persisted_classes() -> list[type]:
    roots = {obj for module in _modules() for obj in vars(module).values()
             if _is_record(obj)
             and obj.__module__.startswith("normalize.")
             and (_reads_back(obj) or issubclass(obj, BaseEvent))}
    seen: set[type] = set()
    todo = list(roots)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        hints = _hints(cls)
        todo.extend(c for name, _ in _fields(cls) for c in _nested(hints[name]))
    return sorted(seen - {BaseEvent}, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def value_for(tp: Any, default: Any, name: str, depth: int = 0) -> Any:
    """A value of type `tp` unlike `default` (and not empty, so nested values are seen)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    origin = {Sequence: list, Mapping: dict}.get(origin, origin)
    if tp is Any or tp is object:
        return {"any": [1, "two", None]}
    if origin is typing.Literal:
        return ([a for a in args if a != default] or list(args))[-1]
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return value_for(options[0], default, name, depth)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [m for m in tp if m != default][-1]
    if tp is bool:
        return not default if isinstance(default, bool) else True
    if tp is int:
        return 7 if default != 7 else 8
    if tp is float:
        return 2.5 if default != 2.5 else 3.5
    if tp is str:
        return f"{name}-value"
    if _is_record(tp):
        return build(tp, depth + 1)
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        item = args[0] if args else Any
        if depth > 1 and _nested(item):
            return () if origin is tuple else []  # a tree (steps in steps) stops somewhere
        made = [value_for(item, dataclasses.MISSING, name, depth)]
        return tuple(made) if origin is tuple else made
    if origin is dict or tp is dict:
        value_type = args[1] if args else Any
        return {f"{name}-key": value_for(value_type, dataclasses.MISSING, name, depth)}
    if origin is typing.ClassVar:
        return dataclasses.MISSING
    raise AssertionError(f"no example value for a field of type {tp!r} ({name})")


# strings whose legal values their type cannot say (a mode, a choice between two keys)
EXAMPLES: dict[tuple[str, str], Any] = {
    ("Permissions", "mode"): "yes", ("Permissions", "sandbox"): "read-only",
    ("ServerSpec", "url"): "", ("ServerSpec", "sandbox"): "read-only",
}


def build(cls: type, depth: int = 0) -> Any:
    hints = _hints(cls)
    values = {name: EXAMPLES[cls.__name__, name] if (cls.__name__, name) in EXAMPLES
              else value_for(hints[name], default, name, depth)
              for name, default in _fields(cls)}
    return cls(**values)


def codec(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """How `cls` is written and read: its own methods, or its holder's (a nested class)."""
    for write, read in (("to_dict", "from_dict"), ("to_json", "from_json")):
        if callable(getattr(cls, read, None)):
            return getattr(cls, write), getattr(cls, read)
    raise AssertionError(f"{cls.__name__}: persisted, but it cannot be read back")


def _own_codec(cls: type) -> bool:
    return any(callable(getattr(cls, read, None)) for read in ("from_dict", "from_json"))


CLASSES = persisted_classes()
# a nested class without a codec of its own is written and read by its holder, whose
# round trip covers it; an event must read itself back (the journal is decoded event by event)
OWN_CODEC = [c for c in CLASSES if _own_codec(c) or issubclass(c, BaseEvent)]


def test_the_walk_finds_the_task_and_what_it_holds() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"Task", "Decision", "Action", "ActionResult", "Usage", "Limits", "Wait",
            "Frame", "ActionFinished"} <= names


def _round_trip(cls: type, original: Any) -> Any:
    write, read = codec(cls)
    return read(json.loads(json.dumps(write(original), default=lambda v: getattr(v, "value", v))))


@pytest.mark.parametrize("cls", OWN_CODEC, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_persisted_class_round_trips_with_values_unlike_its_defaults(cls: type) -> None:
    original = build(cls)
    again = _round_trip(cls, original)
    compared = [f.name for f in dataclasses.fields(cls) if f.compare] \
        if dataclasses.is_dataclass(cls) else [name for name, _ in _fields(cls)]
    for name in compared:
        assert getattr(again, name) == getattr(original, name), \
            f"{cls.__name__}.{name} did not survive the round trip"


def test_a_decision_keeps_its_max_concurrency() -> None:
    from normalize.task import Decision

    assert Decision.from_dict(Decision(max_concurrency=4).to_dict()).max_concurrency == 4
