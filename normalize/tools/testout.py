"""Reading a test run's output for a person: the first failure, why collection failed, counts.

The `test` tool puts these lines first in its result, so a preview, a one-line
display or a workflow's capture shows the failing test's own assertion (or the
reason the tests could not even be collected) before the log.
"""

from __future__ import annotations

import re

__all__ = ["collection_error", "first_failure", "progress_counts"]

_SHORT_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+.*)$", re.MULTILINE)
_E_LINE = re.compile(r"^E\s+(\S.*)$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(?:ERROR:|ImportError while|[A-Za-z]*Error: )\s*(.*)$",
                         re.MULTILINE)
_PROGRESS = re.compile(r"^([.FEsxX]+)\s*(?:\[\s*\d+%\])?\s*$", re.MULTILINE)
E_LINES = 6  # assertion lines shown under the first failure


def first_failure(output: str) -> list[str]:
    """The first failing test's name and assertion, error-first; empty when none is found."""
    out: list[str] = []
    named = _SHORT_FAILED.search(output)
    if named is not None:
        out.append(f"FAILED {named.group(1)}")
    assertion = [m.group(1).rstrip() for m in _E_LINE.finditer(output)]
    first_block: list[str] = []
    for line in output.splitlines():  # the first run of `E   ` lines only
        if line.startswith("E ") or line == "E":
            first_block.append(line.rstrip())
        elif first_block:
            break
    if first_block:
        out.extend(f"  {line}" for line in first_block[:E_LINES])
    elif assertion and not out:
        out.append(assertion[0])
    return out


def collection_error(output: str) -> str:
    """The first line that says why pytest could not collect the tests."""
    found = _E_LINE.search(output)
    if found is not None:
        return found.group(1).strip()
    found = _ERROR_LINE.search(output)
    if found is not None:
        return found.group(0).strip()
    return next((line.strip() for line in output.splitlines() if line.strip()),
                "pytest printed nothing")


def progress_counts(output: str) -> dict[str, int]:
    """Counts from pytest's `-q` progress dots, for a run stopped before its summary."""
    counts: dict[str, int] = {}
    names = {".": "passed", "F": "failed", "E": "errors", "s": "skipped", "x": "xfailed",
             "X": "xpassed"}
    for match in _PROGRESS.finditer(output):
        for char in match.group(1):
            key = names[char]
            counts[key] = counts.get(key, 0) + 1
    return counts
