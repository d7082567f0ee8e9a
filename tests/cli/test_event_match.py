"""The views dispatch on the whole event union: a kind left out fails type-checking.

Mutation-style: copies of `describe.py` and `render.py` with one event class
taken out of their `match` must fail mypy at `assert_never`, naming the class;
a new event added to `Event` but to no view fails the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import mypy.api

from normalize.events import Event, HookRan

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "normalize" / "cli"


def test_every_event_class_is_in_the_union() -> None:
    from normalize.events import EVENT_TYPES, UnknownEvent

    members = set(Event.__args__)
    assert set(EVENT_TYPES.values()) | {UnknownEvent} == members


def test_a_view_that_forgets_an_event_kind_fails_mypy(tmp_path: Path) -> None:
    targets, expected = [], set()
    for name in ("describe", "render"):
        source = (CLI / f"{name}.py").read_text()
        assert source.count("| HookRan()") == 1, f"{name}.py no longer names HookRan once"
        path = tmp_path / f"forgets_{name}.py"
        path.write_text(source.replace("| HookRan()", ""))
        targets.append(str(path))
        line = next(n for n, text in enumerate(source.splitlines(), 1)
                    if "assert_never(event)" in text)
        expected.add(f'{path}:{line}: error: Argument 1 to "assert_never" has incompatible '
                     f'type "{HookRan.__name__}"')
    report, errors, status = mypy.api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary", "--hide-error-context", *targets])
    assert errors == ""
    found = {re.sub(r"; expected.*$", "", line) for line in report.splitlines()
             if ": error:" in line}
    assert found == expected, report
    assert status == 1
