"""What chose the serialisation of events: the dataclasses and field-driven serialiser events
used to be, beside the `msgspec.Struct` union they are now, in one run, side by side (issue #43).

    python bench/serial.py                  # every row, best of 5
    python bench/serial.py --lines 10000 --rounds 7

Rows, each the same work done both ways ("before": a frozen, keyword-only dataclass per
event class, `normalize.serial`'s `Record` codec and the store's JSON encoder, as the
events were until issue #43, rebuilt here from today's fields; "after": the real classes):

- class creation: 120 frozen, keyword-only classes of 8 fields (the shape of an event),
  and the event union itself (every class of `normalize.events`, made again from its
  fields: `@dataclass` beside `msgspec.defstruct` on `BaseEvent`, tagged as the union is);
- encode: an `action_finished` event to the bytes the journal stores, 20,000 times
  (`to_dict` + `json_bytes` beside `BaseEvent.to_bytes`, two events in turn so the
  one-event memo of `to_bytes` never answers);
- decode: a 10,000-line journal read back as typed events (`read_journal` + the field-driven
  decoder beside `normalize.store.journal.read_events`: one `Decoder(union)` call);
- the task record a checkpoint appends (not moved: see the README's cost section): its
  `to_dict` + `json_bytes`, beside `to_dict` + `msgspec.json.encode`.
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

import msgspec

from normalize import events
from normalize.events import EVENT_VERSION, BaseEvent
from normalize.fsutil import json_bytes
from normalize.serial import Record, decode
from normalize.store.journal import read_events, read_journal

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


def _own_fields(cls: type[BaseEvent]) -> list[tuple[str, Any, Any]]:
    """(name, type, default) of the fields `cls` adds to `BaseEvent`'s stamps."""
    hints = typing.get_type_hints(cls, vars(events))
    out = []
    for info in msgspec.structs.fields(cls):
        if info.name in BaseEvent.__struct_fields__:
            continue
        default = msgspec.field(default_factory=info.default_factory) \
            if info.default_factory is not msgspec.NODEFAULT else info.default
        out.append((info.name, hints[info.name], default))
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class OldBase(Record):
    """The event base as it was: a dataclass whose `type` is a field, read by `Record`."""

    type: str
    task_id: str = ""
    seq: int = 0
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["v"] = EVENT_VERSION
        return data


OWN_FIELDS: dict[type, list[tuple[str, Any, Any]]] = {}  # read once, outside the timing


def make_old_union() -> dict[str, type[OldBase]]:
    """The union as dataclasses: each class's fields and defaults, its `type` a Literal."""
    made: dict[str, type[OldBase]] = {}
    for cls in EVENT_CLASSES:
        tag = cls.__struct_config__.tag
        namespace: dict[str, Any] = {"__annotations__": {"type": typing.Literal[tag]},
                                     "type": tag}
        for name, tp, default in OWN_FIELDS[cls]:
            namespace["__annotations__"][name] = tp
            namespace[name] = dataclasses.field(default_factory=default.default_factory) \
                if isinstance(default, msgspec._core.Factory) else default
        made[str(tag)] = dataclasses.dataclass(frozen=True, kw_only=True)(
            type(cls.__name__, (OldBase,), namespace))
    return made


def make_union_structs() -> list[type]:
    return [msgspec.defstruct(cls.__name__, OWN_FIELDS[cls], bases=(BaseEvent,), frozen=True,
                              kw_only=True, tag=cls.__struct_config__.tag)
            for cls in EVENT_CLASSES]


def sample(seq: int) -> events.ActionFinished:
    return events.ActionFinished(
        task_id="t-20261207-abcdef", seq=seq, ts=1796675400.123, turn=3, index=1,
        key="3.1", tool="run", command="run pytest -q", status="ok", duration=0.4125,
        exit_code=0, preview="collected 12 items\n12 passed in 0.4s\n",
        data={"passed": 12, "failed": 0})


def write_journal(path: Path, lines: int) -> None:
    kinds: list[BaseEvent] = [
        sample(1),
        events.ActionStarted(task_id="t-1", seq=1, ts=1.0, turn=3, index=1, key="3.1",
                             tool="run", command="run pytest -q",
                             action={"tool": "run", "args": ["pytest", "-q"]}, read_only=False),
        events.StepStarted(task_id="t-1", seq=2, ts=2.0, name="tests", index=1, total=3)]
    with open(path, "wb") as fh:
        for n in range(lines):
            fh.write(kinds[n % len(kinds)].to_bytes() + b"\n")


def old_read(path: Path, union: dict[str, type[OldBase]]) -> list[OldBase]:
    return [decode(union[data["type"]], data) for data in read_journal(path)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--encodes", type=int, default=20_000)
    args = parser.parse_args(argv)

    OWN_FIELDS.update({cls: _own_fields(cls) for cls in EVENT_CLASSES})
    union = make_old_union()
    new = [sample(42), sample(43)]
    old = [union["action_finished"](**{k: v for k, v in e.to_dict().items() if k != "v"})
           for e in new]
    assert json_bytes(old[0].to_dict()) == new[0].to_bytes(), "both sides write the same bytes"

    rows: list[tuple[str, float, float]] = []
    rows.append((f"create {CLASSES} classes of {FIELDS} fields",
                 best(make_dataclasses, args.rounds), best(make_structs, args.rounds)))
    rows.append((f"create the event union ({len(EVENT_CLASSES)} classes)",
                 best(make_old_union, args.rounds), best(make_union_structs, args.rounds)))
    half = args.encodes // 2
    rows.append((f"encode an event {args.encodes:,} times",
                 best(lambda: [json_bytes(e.to_dict()) for _ in range(half) for e in old],
                      args.rounds),
                 best(lambda: [e.to_bytes() for _ in range(half) for e in new], args.rounds)))
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "journal.jsonl"
        write_journal(path, args.lines)
        before, after = old_read(path, union), read_events(path)
        assert len(before) == len(after) == args.lines
        assert all(a.to_dict() == b.to_dict() for a, b in zip(before, after, strict=True))
        rows.append((f"read a {args.lines:,}-line journal as typed events",
                     best(lambda: old_read(path, union), args.rounds),
                     best(lambda: read_events(path), args.rounds)))
    task = _task()
    rows.append(("a checkpoint's task record, 2,000 times (to_dict + JSON)",
                 best(lambda: [json_bytes(task.to_dict()) for _ in range(2000)], args.rounds),
                 best(lambda: [msgspec.json.encode(task.to_dict()) for _ in range(2000)],
                      args.rounds)))

    print(f"{'row':<56} {'before ms':>10} {'after ms':>9} {'ratio':>7}")
    for name, was, now in rows:
        print(f"{name:<56} {was:>10.2f} {now:>9.2f} {was / now:>6.1f}×")
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, best of {args.rounds}")
    return 0


def _task() -> Any:
    """A task as a 20-step workflow leaves it mid-run (the checkpoint record's shape)."""
    from normalize.task import Task

    task = Task(id="0a1b2c3d", goal="fix the failing tests", workspace="/tmp/project",
                driver="workflow")
    task.turn, task.actions_run, task.seq = 20, 20, 100
    task.scope_state = {"notes": [f"step {i}" for i in range(20)]}
    return task


if __name__ == "__main__":
    raise SystemExit(main())
