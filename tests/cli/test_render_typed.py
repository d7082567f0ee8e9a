"""The renderers dispatch on event classes, so mypy --strict catches a misspelt event field.

The proof is mutation-style: copies of the real `describe.py` and `render.py`, with one
field misspelt inside their `case ActionFinished():` branch (or a function the branch hands
the event to, typed `event: ActionFinished`), must fail mypy, naming the field; the real
modules must pass. Dispatch on dicts again and the copies type-check (or
lose their `case ActionFinished():`), and this test fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import mypy.api

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "normalize" / "cli"
ANCHOR = "case ActionFinished():"
HANDED = re.compile(r"def \w+\(.*\bevent: ActionFinished\b")  # a branch's helper


def misspell(source: str, field: str, wrong: str) -> tuple[str, int]:
    """`source` with the first `event.<field>` read in an ActionFinished branch misspelt,
    and that line's number."""
    assert ANCHOR in source, "the module no longer dispatches on ActionFinished"
    lines = source.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.strip() != ANCHOR and not HANDED.search(line):
            continue
        indent = len(line) - len(line.lstrip())
        for inner in range(number + 1, len(lines)):
            body = lines[inner]
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break  # the branch ended without touching the field
            if f"event.{field}" in body:
                lines[inner] = body.replace(f"event.{field}", f"event.{wrong}", 1)
                return "".join(lines), inner + 1
    raise AssertionError(f"no ActionFinished branch reads event.{field}")


def test_a_misspelt_field_in_the_dispatch_fails_mypy_and_the_real_modules_pass(
        tmp_path: Path) -> None:
    expected: set[str] = set()
    targets: list[str] = []
    for name in ("describe", "render"):
        mutant, line = misspell((CLI / f"{name}.py").read_text(), "status", "stauts")
        path = tmp_path / f"mutant_{name}.py"
        path.write_text(mutant)
        targets.append(str(path))
        expected.add(f'{path}:{line}: error: "ActionFinished" has no attribute "stauts"')
    real = [str(CLI / "describe.py"), str(CLI / "render.py")]
    report, errors, status = mypy.api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary", "--hide-error-context", *targets, *real,
    ])
    assert errors == ""
    found = [re.sub(r";.*$", "", line) for line in report.splitlines() if ": error:" in line]
    assert set(found) == expected, report  # each misspelling caught where it was made, and
    assert status == 1                     # nothing else: the real modules type-check
