"""Persistence of tasks: files, journals, locks, migrations.

Names load on first use: importing one module of the store (the journal,
say) does not import the task store and what it imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "JournalWriter": "normalize.store.journal",
    "read_journal": "normalize.store.journal",
    "config_home": "normalize.homes",
    "data_home": "normalize.homes",
    "StoreProblem": "normalize.store.taskstore",
    "TaskLock": "normalize.store.taskstore",
    "TaskStore": "normalize.store.taskstore",
    "atomic_write_bytes": "normalize.store.taskstore",
    "config_changed": "normalize.store.taskstore",
}

if TYPE_CHECKING:
    from normalize.homes import config_home, data_home
    from normalize.store.journal import JournalWriter, read_journal
    from normalize.store.taskstore import (
        StoreProblem,
        TaskLock,
        TaskStore,
        atomic_write_bytes,
        config_changed,
    )


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'normalize.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


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
