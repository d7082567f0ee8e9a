"""One field-driven JSON serialiser for every persisted dataclass.

`encode(obj)` and `decode(cls, data)` walk a dataclass's fields and their
types (nested dataclasses, enums, `Literal`s, lists, tuples, dicts, `X | None`)
from a plan made once per class. A class subclasses `Record` for `to_dict` /
`from_dict`. The few places where the JSON differs from the fields are
declared, never written by hand: per field, `stored(...)` (another key,
left out when it equals its default, stored as a wrapper such as `Kept`,
written as a fixed value); per class, `serial_shape = Shape(...)` (written as a JSON
array, an older stored shape upgraded before decoding).

Values typed `Any` pass through as they are (a `Kept` inside one reaches the
store's encoder); dicts and lists of them are copied two levels deep, so
the JSON never shares a mutable list with the live object.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

__all__ = ["Record", "Shape", "decode", "encode", "stored"]

JSON = dict[str, Any]
T = TypeVar("T")
Codec = Callable[[Any], Any]
_META = "normalize.serial"


@dataclass(frozen=True)
class Stored:
    """How one field is stored, when it differs from the plain rule."""

    key: str | None = None  # the JSON key (default: the field's name)
    omit_default: bool = False  # left out while it equals its default
    wrap: Codec | None = None  # stores the value as this instead (`Kept`: written beside the task)
    unwrap: Codec | None = None  # applied to the stored value before decoding
    fixed: Callable[[], Any] | None = None  # always written as this (a schema version)


def stored(**how: Any) -> dict[str, Stored]:
    """Field metadata: `field(default=..., metadata=stored(key="as", omit_default=True))`."""
    return {_META: Stored(**how)}


@dataclass(frozen=True)
class Shape:
    """How a whole class is stored, when it differs from a JSON object of its fields."""

    as_list: bool = False  # its fields in order, as a JSON array
    upgrade: Codec | None = None  # an older stored shape to today's, before decoding


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    enc: Codec
    dec: Codec
    how: Stored
    default: Any  # dataclasses.MISSING when the field is required


@dataclass(frozen=True)
class _Plan:
    fields: tuple[_Field, ...]
    shape: Shape


_PLANS: dict[type, _Plan] = {}
_PLAIN = Stored()  # a field stored by the plain rule


def _same(value: Any) -> Any:
    return value


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return dict(value)
    if type(value) is list:
        return list(value)
    return value


def _plain_dict(value: Mapping[str, Any]) -> JSON:
    return {k: _copy(v) for k, v in value.items()}


def _plain_list(value: Sequence[Any]) -> list[Any]:
    return [_copy(v) for v in value]


def _optional(codec: Codec) -> Codec:
    return lambda value: None if value is None else codec(value)


def _literal(choices: tuple[Any, ...]) -> Codec:
    def check(value: Any) -> Any:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(map(repr, choices))}")
        return value
    return check


def _sequence(item: tuple[Codec, Codec], out: type) -> tuple[Codec, Codec]:
    enc, dec = item
    encode_all: Codec = _plain_list if enc is _same else (lambda v: [enc(x) for x in v])
    decode_all: Codec = (lambda v: out(v)) if dec is _same else (lambda v: out(dec(x) for x in v))
    return encode_all, decode_all


def _mapping(value: tuple[Codec, Codec]) -> tuple[Codec, Codec]:
    enc, dec = value
    encode_all: Codec = _plain_dict if enc is _same else (
        lambda v: {k: enc(x) for k, x in v.items()})
    decode_all: Codec = dict if dec is _same else (lambda v: {k: dec(x) for k, x in v.items()})
    return encode_all, decode_all


_SCALARS: dict[Any, tuple[Codec, Codec]] = {
    Any: (_same, _same), object: (_same, _same), str: (_same, _same), type(None): (_same, _same),
    int: (_same, int), float: (_same, float), bool: (_same, bool),
}


def _codec(tp: Any) -> tuple[Codec, Codec]:
    """The encoder and decoder of a value of type `tp`."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return _same, _literal(args)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            return _same, _same  # `str | int`: JSON tells them apart
        enc, dec = _codec(options[0])
        return _optional(enc), _optional(dec)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return (lambda v: v.value), tp
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        cls = tp
        return encode, (lambda v: decode(cls, v))
    if origin is tuple:
        return _sequence(_codec(args[0] if args else Any), tuple)
    if origin in (list, Sequence) or tp in (list, tuple):
        return _sequence(_codec(args[0] if args else Any), list)
    if origin in (dict, Mapping) or tp is dict:
        return _mapping(_codec(args[1] if args else Any))
    raise TypeError(f"no JSON form for the type {tp!r}")


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    hints = typing.get_type_hints(cls)
    planned = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        how = f.metadata.get(_META) or _PLAIN
        enc, dec = _codec(hints[f.name])
        planned.append(_Field(f.name, how.key or f.name, enc, dec, how, _default(f)))
    plan = _PLANS[cls] = _Plan(tuple(planned), getattr(cls, "serial_shape", Shape()))
    return plan


def encode(obj: Any) -> Any:
    """`obj`, a dataclass, as JSON (a dict, or a list for `Shape(as_list=True)`)."""
    plan = _plan(type(obj))
    out: JSON = {}
    for f in plan.fields:
        how = f.how
        if how is _PLAIN:
            out[f.key] = f.enc(getattr(obj, f.name))
        elif how.fixed is not None:
            out[f.key] = how.fixed()
        else:
            value = getattr(obj, f.name)
            if how.omit_default and value == f.default:
                continue
            out[f.key] = f.enc(value) if how.wrap is None else how.wrap(value)
    return list(out.values()) if plan.shape.as_list else out


def decode(cls: type[T], data: Any) -> T:
    """An instance of the dataclass `cls` from its JSON; a missing required key is a KeyError."""
    plan = _plan(cls)
    if plan.shape.upgrade is not None:
        data = plan.shape.upgrade(data)
    if plan.shape.as_list:
        data = dict(zip((f.key for f in plan.fields), data, strict=False))
    if type(data) is not dict and not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: expected a JSON object, not {type(data).__name__}")
    values: JSON = {}
    for f in plan.fields:
        if f.key in data:
            value = data[f.key]
            if f.how is not _PLAIN and f.how.unwrap is not None:
                value = f.how.unwrap(value)
            values[f.name] = f.dec(value)
        elif f.default is dataclasses.MISSING:
            raise KeyError(f.key)
    return cls(**values)


class Record:
    """A dataclass that round-trips through JSON by its fields (`to_dict` / `from_dict`)."""

    __slots__ = ()  # a class sets `serial_shape: ClassVar[Shape]` to store itself otherwise

    def to_dict(self) -> JSON:
        data: JSON = encode(self)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return decode(cls, data)
