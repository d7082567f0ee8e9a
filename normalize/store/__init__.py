"""Persistence of tasks: files, journals, locks, migrations."""

from normalize.homes import config_home, data_home
from normalize.store.journal import JournalWriter, read_journal
from normalize.store.taskstore import (
    StoreProblem,
    TaskLock,
    TaskStore,
    atomic_write_bytes,
    config_changed,
)

__all__ = [
    "JournalWriter",
    "StoreProblem",
    "TaskLock",
    "TaskStore",
    "atomic_write_bytes",
    "config_changed",
    "config_home",
    "data_home",
    "read_journal",
]
