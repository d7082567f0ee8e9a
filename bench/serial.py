"""What chooses the serialisation of events and records: today's dataclasses and field-driven
serialiser beside `msgspec.Struct`, measured in one run, side by side (issue #43).

    python bench/serial.py                  # every row, best of 5
    python bench/serial.py --lines 10000 --rounds 7

Rows, each the same work done both ways:

- class creation: 120 frozen, keyword-only classes of 8 fields (the shape of an event),
  and the event union itself (every class of `normalize.events`, made again from its
  fields: `@event` dataclasses beside `msgspec.defstruct` with the same fields);
- encode: one `action_finished` event to the bytes the journal stores, 20,000 times
  (`to_dict` + the store's JSON encoder beside a `msgspec.json.Encoder`);
- decode: a 10,000-line journal written by today's emitter read back as typed events
  (`read_journal` + `decode_events` beside one `Decoder(Union).decode_lines`).

The msgspec side is built from the real event classes' fields (names, types, defaults,
the `type` literal as the union's tag), so both sides carry the same data; it needs
`pip install msgspec` (not a dependency of normalize until a change moves to it).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import tempfile
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import msgspec
except ImportError:  # pragma: no cover - said in one line
    raise SystemExit("bench/serial.py needs msgspec: pip install msgspec") from None

from normalize import events
from normalize.events import BaseEvent, decode_events, event
from normalize.fsutil import json_bytes
from normalize.store.journal import read_journal

FIELDS = 8
CLASSES = 120


def best(fn: Callable[[], object], rounds: int) -> float:
    """The fastest of `rounds` runs of `fn`, in milliseconds (garbage collection off)."""
    times = []
    for _ in range(rounds):
        gc.disable()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
        gc.enable()
    return min(times)


def make_dataclasses() -> None:
    for n in range(CLASSES):
        namespace: dict[str, Any] = {"__annotations__": {f"f{i}": "int" for i in range(FIELDS)}}
        namespace.update({f"f{i}": 0 for i in range(FIELDS)})
        dataclasses.dataclass(frozen=True, kw_only=True)(type(f"C{n}", (), namespace))


def make_structs() -> None:
    for n in range(CLASSES):
        msgspec.defstruct(f"S{n}", [(f"f{i}", int, 0) for i in range(FIELDS)],
                          frozen=True, kw_only=True)


EVENT_CLASSES = list(events.EVENT_TYPES.values())


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(events))


def _struct_fields(cls: type) -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.name == "type":
            continue
        if f.default_factory is not dataclasses.MISSING:
            default: Any = msgspec.field(default_factory=f.default_factory)
        elif f.default is not dataclasses.MISSING:
            default = f.default
        else:
            default = msgspec.NODEFAULT
        out.append((f.name, hints[f.name], default))
    out.append(("v", int, 1))
    return out


def make_union_dataclasses() -> None:
    for cls in EVENT_CLASSES:
        namespace: dict[str, Any] = {"__annotations__": {}}
        for f in dataclasses.fields(cls):
            if f.name in ("task_id", "seq", "ts"):
                continue
            namespace["__annotations__"][f.name] = f.type
            namespace[f.name] = (dataclasses.field(default_factory=f.default_factory)
                                 if f.default_factory is not dataclasses.MISSING else f.default)
        event(type(cls.__name__, (BaseEvent,), namespace))


def make_union_structs() -> list[type]:
    return [msgspec.defstruct(cls.__name__, _struct_fields(cls), frozen=True, kw_only=True,
                              tag_field="type", tag=cls.__dataclass_fields__["type"].default)
            for cls in EVENT_CLASSES]


def sample_event() -> BaseEvent:
    return events.ActionFinished(
        task_id="t-20261207-abcdef", seq=42, ts=1796675400.123, turn=3, index=1,
        key="3.1", tool="run", command="run pytest -q", status="ok", duration=0.4125,
        exit_code=0, preview="collected 12 items\n12 passed in 0.4s\n",
        data={"passed": 12, "failed": 0})


def write_journal(path: Path, lines: int) -> None:
    kinds = [sample_event(),
             events.ActionStarted(task_id="t-1", seq=1, ts=1.0, turn=3, index=1, key="3.1",
                                  tool="run", command="run pytest -q",
                                  action={"tool": "run", "args": ["pytest", "-q"]},
                                  read_only=False),
             events.StepStarted(task_id="t-1", seq=2, ts=2.0, name="tests", index=1, total=3)]
    with open(path, "wb") as fh:
        for n in range(lines):
            fh.write(json_bytes(kinds[n % len(kinds)].to_dict()) + b"\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--encodes", type=int, default=20_000)
    args = parser.parse_args(argv)

    structs = make_union_structs()
    Union = typing.Union[tuple(structs)]  # noqa: UP007 - a runtime union of the made classes
    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(Union)
    ev = sample_event()
    by_name = {s.__name__: s for s in structs}
    mirror = by_name[type(ev).__name__](**{k: v for k, v in ev.to_dict().items()
                                          if k != "type"})
    assert msgspec.json.decode(encoder.encode(mirror)) == msgspec.json.decode(
        json_bytes(ev.to_dict())), "both sides must write the same JSON"

    rows: list[tuple[str, float, float]] = []
    rows.append((f"create {CLASSES} classes of {FIELDS} fields",
                 best(make_dataclasses, args.rounds), best(make_structs, args.rounds)))
    rows.append((f"create the event union ({len(EVENT_CLASSES)} classes)",
                 best(make_union_dataclasses, args.rounds), best(make_union_structs, args.rounds)))
    rows.append((f"encode an event {args.encodes:,} times",
                 best(lambda: [json_bytes(ev.to_dict()) for _ in range(args.encodes)],
                      args.rounds),
                 best(lambda: [encoder.encode(mirror) for _ in range(args.encodes)],
                      args.rounds)))
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "journal.jsonl"
        write_journal(path, args.lines)
        today = list(decode_events(read_journal(path)))
        fast = decoder.decode_lines(path.read_bytes())
        assert len(today) == len(fast) == args.lines
        assert all(type(a).__name__ == type(b).__name__ for a, b in zip(today, fast, strict=True))
        rows.append((f"read a {args.lines:,}-line journal as typed events",
                     best(lambda: list(decode_events(read_journal(path))), args.rounds),
                     best(lambda: decoder.decode_lines(path.read_bytes()), args.rounds)))

    print(f"{'row':<48} {'today ms':>10} {'msgspec ms':>11} {'ratio':>7}")
    for name, now, other in rows:
        print(f"{name:<48} {now:>10.2f} {other:>11.2f} {now / other:>6.1f}×")
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, best of {args.rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
