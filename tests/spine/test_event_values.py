"""Events compare, hash and print by all their fields, through one implementation.

A dataclass writes and compiles `__eq__`, `__hash__` and `__repr__` for each class;
the event union's classes are made at every start of a run, so they are frozen
`msgspec.Struct`s whose comparisons are msgspec's own (in C, one for every class).
These tests pin both halves: the behaviour is a frozen record's, and no event
class carries its own.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from normalize.events import EVENT_TYPES, BaseEvent, Notice, RunStarted

CLASSES = sorted(EVENT_TYPES.values(), key=lambda cls: cls.__name__)


def _other(value: Any) -> Any:
    """A value of the same kind that differs from `value`."""
    table: dict[type, Any] = {bool: not value, int: 7, float: 7.5, str: "other", list: ["x"],
                              dict: {"x": 1}, tuple: ("x",)}
    return table.get(type(value), "other")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_an_event_class_writes_no_comparison_of_its_own(cls: type[BaseEvent]) -> None:
    for name in ("__eq__", "__hash__", "__repr__"):
        assert name not in vars(cls), f"{cls.__name__} defines {name}"
    assert issubclass(cls, msgspec.Struct) and cls.__struct_config__.frozen


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_events_are_equal_exactly_when_every_field_is(cls: Any) -> None:
    one, same = cls(task_id="t1", seq=3), cls(task_id="t1", seq=3)
    assert one == same and not one != same
    for name in cls.__struct_fields__:
        changed = msgspec.structs.replace(one, **{name: _other(getattr(one, name))})
        assert changed != one, f"{cls.__name__}.{name} is not compared"
    shown = ", ".join(f"{name}={getattr(one, name)!r}" for name in cls.__struct_fields__)
    assert repr(one) == f"{cls.__qualname__}({shown})"


def test_hash_follows_equality_and_other_classes_never_compare_equal() -> None:
    one, same = RunStarted(task_id="t", goal="g"), RunStarted(task_id="t", goal="g")
    assert hash(one) == hash(same) and len({one, same}) == 1
    assert Notice(task_id="t") != RunStarted(task_id="t")
    assert one.__eq__(object()) is NotImplemented
    with pytest.raises(AttributeError, match="immutable"):
        one.goal = "changed"  # type: ignore[misc]
