"""One field-driven JSON serialiser for every persisted dataclass.

`encode(obj)` and `decode(cls, data)` walk a dataclass's fields and their
types (nested dataclasses, enums, `Literal`s, lists, tuples, dicts, `X | None`)
from a plan made once per class. A class subclasses `Record` for `to_dict` /
`from_dict`. The few places where the JSON differs from the fields are
declared, never written by hand: per field, `stored(...)` (another key,
left out when it equals its default, stored as a wrapper such as `Kept`,
written as a fixed value, not written at all); per class, `serial_shape =
Shape(...)` (written as a JSON array, every field left out at its default,
an older stored shape upgraded before decoding).

Values typed `Any`, and dicts and lists of them, pass through as they are
(the JSON goes straight to the store's encoder; a `Kept` inside one reaches
it); a field whose tables its owner changes in place declares
`stored(wrap=copied)`. Tuples become lists.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

__all__ = ["Record", "Shape", "copied", "decode", "encode", "stored"]

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
    transient: bool = False  # never written; read back as its default (what a run derives)


def stored(**how: Any) -> dict[str, Stored]:
    """Field metadata: `field(default=..., metadata=stored(key="as", omit_default=True))`."""
    return {_META: Stored(**how)}


@dataclass(frozen=True)
class Shape:
    """How a whole class is stored, when it differs from a JSON object of its fields."""

    as_list: bool = False  # its fields in order, as a JSON array
    omit_defaults: bool = False  # every field left out while it equals its default
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
    encoder: Codec  # made from the fields: as fast as a hand-written `to_dict`
    decoder: Codec  # a JSON object to an instance, likewise


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


def copied(value: Mapping[str, Any]) -> JSON:
    """A table copied two levels deep: `stored(wrap=copied)` for one a caller may change."""
    return {k: _copy(v) for k, v in value.items()}


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
    encode_all: Codec = (_same if out is list else list) if enc is _same else (
        lambda v: [enc(x) for x in v])
    decode_all: Codec = (lambda v: out(v)) if dec is _same else (lambda v: out(dec(x) for x in v))
    return encode_all, decode_all


def _mapping(value: tuple[Codec, Codec]) -> tuple[Codec, Codec]:
    enc, dec = value
    encode_all: Codec = _same if enc is _same else (
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
        if how.transient:
            continue
        enc, dec = _codec(hints[f.name])
        planned.append(_Field(f.name, how.key or f.name, enc, dec, how, _default(f)))
    shape = getattr(cls, "serial_shape", Shape())
    fields = tuple(planned)
    plan = _PLANS[cls] = _Plan(fields, shape, _encoder(fields, shape), _decoder(cls, fields))
    return plan


def _encoder(planned: tuple[_Field, ...], shape: Shape) -> Codec:
    """A function writing these fields, generated as `dataclasses` generates `__init__`.

    Its source holds only field names (identifiers) and the keys' `repr`; the
    codecs, defaults and hooks are passed in by name.
    """
    names: JSON = {}
    lines = ["def encode(obj):", "    out = {}"]
    for i, f in enumerate(planned):
        how, key = f.how, repr(f.key)
        names.update({f"enc{i}": f.enc, f"wrap{i}": how.wrap, f"fixed{i}": how.fixed,
                      f"default{i}": f.default})
        if how.fixed is not None:
            lines.append(f"    out[{key}] = fixed{i}()")
            continue
        value = f"wrap{i}(v)" if how.wrap is not None else "v" if f.enc is _same else f"enc{i}(v)"
        lines.append(f"    v = obj.{f.name}")
        if how.omit_default or shape.omit_defaults:
            lines.append(f"    if not v == default{i}:")
            lines.append(f"        out[{key}] = {value}")
        else:
            lines.append(f"    out[{key}] = {value}")
    lines.append("    return list(out.values())" if shape.as_list else "    return out")
    exec("\n".join(lines), names)  # our own field names and reprs, never input
    encoder: Codec = names["encode"]
    return encoder


def _decoder(cls: type, planned: tuple[_Field, ...]) -> Codec:
    """A function reading these fields from a JSON object, generated as `_encoder` is."""
    names: JSON = {"cls": cls, "MissingKey": KeyError}
    lines = ["def decode(data):", "    kw = {}"]
    for i, f in enumerate(planned):
        key, unwrap = repr(f.key), f.how.unwrap
        names.update({f"dec{i}": f.dec, f"unwrap{i}": unwrap})
        raw = f"unwrap{i}(data[{key}])" if unwrap is not None else f"data[{key}]"
        value = raw if f.dec is _same else f"dec{i}({raw})"
        lines.append(f"    if {key} in data:")
        lines.append(f"        kw[{f.name!r}] = {value}")
        if f.default is dataclasses.MISSING:
            lines.append(f"    else:\n        raise MissingKey({key})")
    lines.append("    return cls(**kw)")
    exec("\n".join(lines), names)  # our own field names and reprs, never input
    decoder: Codec = names["decode"]
    return decoder


def encode(obj: Any) -> Any:
    """`obj`, a dataclass, as JSON (a dict, or a list for `Shape(as_list=True)`)."""
    plan = _PLANS.get(type(obj)) or _plan(type(obj))
    return plan.encoder(obj)


def decode(cls: type[T], data: Any) -> T:
    """An instance of the dataclass `cls` from its JSON; a missing required key is a KeyError."""
    plan = _plan(cls)
    if plan.shape.upgrade is not None:
        data = plan.shape.upgrade(data)
    if plan.shape.as_list:
        data = dict(zip((f.key for f in plan.fields), data, strict=False))
    if type(data) is not dict and not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: expected a JSON object, not {type(data).__name__}")
    return plan.decoder(data)  # type: ignore[no-any-return]


class Record:
    """A dataclass that round-trips through JSON by its fields (`to_dict` / `from_dict`)."""

    __slots__ = ()  # a class sets `serial_shape: ClassVar[Shape]` to store itself otherwise

    def to_dict(self) -> JSON:
        data: JSON = encode(self)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return decode(cls, data)
