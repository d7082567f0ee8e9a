"""One run's memory: what each model request recalls, what the run's success proposes.

The runner makes a `RunMemory` per run and lends `recall` to the driver (the
one guarded message, asked before each request) and `consolidate` to the
engine (asked once, in the exit door, only when the run ended done). The
store is opened for each of those and closed after (about a millisecond), so
nothing stays open past the run, and a run with no memory on disk creates
nothing and costs one `stat`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from normalize.events import Event, MemoryProposed, decode_events
from normalize.memory import MemoryStore, guard_message, open_memory, recall
from normalize.memory.consolidate import candidates, contradiction
from normalize.memory.settings import MemorySettings
from normalize.task import Task

ReadJournal = Callable[[str], Iterable[Mapping[str, Any]]]
INSTRUCTIONS_CHARS = 12_000


def _instructions(workspace: Path) -> str:
    """The workspace's AGENTS.md (else CLAUDE.md), as far as the prompt reads it ('' if none)."""
    for name in ("AGENTS.md", "CLAUDE.md"):
        try:
            with (workspace / name).open(encoding="utf-8", errors="replace") as f:
                return f.read(INSTRUCTIONS_CHARS)
        except OSError:
            continue
    return ""


class RunMemory:
    """The memory of the run's project under the data home `home`, as `settings` allow."""

    def __init__(self, home: Path, workspace: Path, settings: MemorySettings,
                 read_journal: ReadJournal, redact: Callable[[str], str]) -> None:
        self.home = home
        self.workspace = workspace
        self.settings = settings
        self.read_journal = read_journal
        self.redact = redact
        self.recalls = False  # whether requests ask for memory (see `start`)

    @classmethod
    def start(cls, home: Path, workspace: Path, settings: MemorySettings,
              read_journal: ReadJournal, redact: Callable[[str], str]) -> RunMemory:
        """The run's memory; it recalls only when `top_k` allows and the project (or the
        user) has accepted entries as the run starts, so a run with nothing to recall sends
        exactly what it would without memory."""
        run = cls(home, workspace, settings, read_journal, redact)
        if settings.top_k > 0:
            with run._store() as store:
                run.recalls = bool(store.entries("accepted"))
        return run

    @contextmanager
    def _store(self) -> Iterator[MemoryStore]:
        store = open_memory(self.home, self.workspace, self.settings.store)
        try:
            yield store
        finally:
            store.close()

    def recall(self, query: str) -> str:
        """The guarded memory message for `query` (the run's input), '' when nothing fits."""
        with self._store() as store:
            return guard_message(recall(store, query, self.workspace, self.settings.top_k))

    def consolidate(self, task: Task) -> list[Event]:
        """The candidates of the task that succeeded, stored as the mode says, and said."""
        if self.settings.mode == "off":
            return []
        with self._store() as store:
            return self._propose(store, task)

    def _propose(self, store: MemoryStore, task: Task) -> list[Event]:
        events = decode_events(self.read_journal(task.id))
        found = candidates(events, task.id, self.workspace, store.keys())
        if self.settings.held:
            if not found.entries:
                return []
            return [MemoryProposed(dropped=[
                f"{len(found.entries)} candidate(s) not written: {self.settings.held} (a "
                "workflow's `memory = \"inbox\"` keeps them)"])]
        stored: list[dict[str, Any]] = []
        instructions = _instructions(self.workspace)
        for entry in found.entries:
            clash = contradiction(entry, instructions)
            if clash:
                entry.why = f"{entry.why}; {clash}"
            entry.text = self.redact(entry.text)
            entry.why = self.redact(entry.why)
            # what the model concluded waits for the person even under `auto`
            entry.state = "accepted" if self.settings.mode == "auto" and \
                entry.source != "model" else "inbox"
            store.add(entry)
            stored.append({"id": entry.id, "text": entry.text, "state": entry.state,
                           "source": entry.source, "why": entry.why})
        if not stored and not found.dropped:
            return []
        return [MemoryProposed(entries=stored, dropped=found.dropped)]
