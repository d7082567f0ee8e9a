"""Reading a test run's output for a person: the first failure, why collection failed, counts.

The `test` tool puts these lines first in its result, so a preview, a one-line
display or a workflow's capture shows the failing test's own assertion (or the
reason the tests could not even be collected) before the log.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

__all__ = ["OutputTail", "collection_error", "first_failure", "progress_counts", "progress_feed"]

_SHORT_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+.*)$", re.MULTILINE)
_E_LINE = re.compile(r"^E\s+(\S.*)$", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(?:ERROR:|ImportError while|[A-Za-z]*Error: )\s*(.*)$",
                         re.MULTILINE)
_PROGRESS = re.compile(r"^([.FEsxX]+)\s*(?:\[\s*\d+%\])?\s*$", re.MULTILINE)
_DOT_KEYS = {".": "passed", "F": "failed", "E": "errors", "s": "skipped", "x": "xfailed",
             "X": "xpassed"}
E_LINES = 6  # assertion lines shown under the first failure


def first_failure(output: str) -> list[str]:
    """The first failing test's name and assertion, error-first; empty when none is found."""
    out: list[str] = []
    named = _SHORT_FAILED.search(output)
    assertion = [m.group(1).rstrip() for m in _E_LINE.finditer(output)]
    if named is not None:  # pytest cuts its summary line to the terminal; its `E` line is whole
        test, dash, _ = named.group(1).partition(" - ")
        out.append(f"FAILED {test} - {assertion[0]}" if dash and assertion else
                   f"FAILED {named.group(1)}")
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
    for match in _PROGRESS.finditer(output):
        for char in match.group(1):
            key = _DOT_KEYS[char]
            counts[key] = counts.get(key, 0) + 1
    return counts


_VERBOSE = re.compile(r"\s(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s+\[\s*\d+%\])?\s*$")
_VERBOSE_KEYS = {"PASSED": "passed", "FAILED": "failed", "ERROR": "errors", "SKIPPED": "skipped",
                 "XFAIL": "xfailed", "XPASS": "xpassed"}
_DOTS = re.compile(r"^[.FEsxX]+(?:\s+\[\s*\d+%\])?\s*$")


class OutputTail:
    """A running program's last lines and, for pytest's progress, its counts so far.

    Fed raw chunks as they arrive; a line is whole once its newline came, and the
    line still being written counts too (pytest prints its dots before the newline).
    """

    def __init__(self, lines: int = 3, *, tests: bool = False) -> None:
        self.rows = lines
        self.tests = tests
        self.whole: list[str] = []
        self.partial = ""
        self.counted: dict[str, int] = {}

    def feed(self, chunk: bytes) -> None:
        text = self.partial + chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        *done, self.partial = text.split("\n")
        for line in done:
            if self.tests:
                _count(line, self.counted)
            if line.strip():
                self.whole.append(line.rstrip())
        del self.whole[:-self.rows]

    def tail(self) -> list[str]:
        """The last lines, the one being written included."""
        shown = [*self.whole, self.partial.rstrip()] if self.partial.strip() else self.whole
        return shown[-self.rows:]

    def counts(self) -> dict[str, int]:
        """The tests' outcomes so far (empty for a program that is not a test run)."""
        found = dict(self.counted)
        if self.tests:
            _count(self.partial, found)
        return found


def _count(line: str, counts: dict[str, int]) -> None:
    """Add one output line's test outcomes (`-q` dots or `-v` words) to `counts`."""
    if _DOTS.match(line):
        for char in line.split()[0]:
            key = _DOT_KEYS[char]
            counts[key] = counts.get(key, 0) + 1
        return
    word = _VERBOSE.search(line)
    if word is not None and "::" in line:
        key = _VERBOSE_KEYS[word.group(1)]
        counts[key] = counts.get(key, 0) + 1


Progress = Callable[[list[str], dict[str, int]], None]


def progress_feed(report: Progress | None, *, tests: bool, every: float = 0.25,
                  clock: Callable[[], float] = time.monotonic) -> Callable[[bytes], None] | None:
    """A chunk reader that tells `report` the tail and counts when they change, at most once
    per `every` seconds (an empty chunk lets a change held back out once its time comes)."""
    if report is None:
        return None
    tail = OutputTail(tests=tests)
    last = [-every]
    told: list[tuple[list[str], dict[str, int]]] = []

    def feed(chunk: bytes) -> None:  # an empty chunk: nothing new, but time went by
        tail.feed(chunk)
        now = clock()
        if now - last[0] >= every:
            shown = (tail.tail(), tail.counts())
            if any(shown) and (not told or told[-1] != shown):
                last[0] = now
                told[:] = [shown]
                report(*shown)

    return feed
