"""The default memory store: one SQLite file under the data home, searched with FTS5 / BM25.

`memory/memory.db` (0600, in a 0700 directory) holds every project's entries
and the user's: an entry's `scope` is `project:KEY` (KEY: the hash of the
repository's git common dir, so a repository's worktrees share it) or `user`.
A store opened for one project sees that project's entries and the user's.

Retrieval ranks with FTS5's BM25 over the entries' text (porter stemming:
"tests" finds "test"), and only accepted entries are searched. Nothing is
created until something is written: retrieving from a data home with no
memory opens nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.fsutil import private_dirs
from normalize.memory.entries import MemoryEntry

if TYPE_CHECKING:
    import sqlite3

SCHEMA = 1
_WORD_RE = re.compile(r"\w+")
STOP_WORDS = frozenset("""
    a an the this that these those it its to of in on at by for with from and or but not no
    is are was were be been do does did can could should would will may might must have has
    had i we you they he she me us our your my please then than so as if when what which who
    """.split())
_COLUMNS = ("id", "text", "source", "why", "state", "scope", "task", "step", "created", "files")


def fts_query(text: str, *, limit: int = 32) -> str:
    """The words of `text` as an FTS5 OR-query (each quoted; stop words left out)."""
    words: list[str] = []
    for word in _WORD_RE.findall(text.lower()):
        if len(word) > 1 and word not in STOP_WORDS and word not in words:
            words.append(word)
    return " OR ".join(f'"{w}"' for w in words[:limit])


class SqliteMemory:
    """Entries of one project (and the user's) in the data home's `memory/memory.db`."""

    def __init__(self, directory: Path, project: str) -> None:
        self.path = directory / "memory.db"
        self.project = project
        self._db: sqlite3.Connection | None = None

    @classmethod
    def open(cls, home: Path, project: str) -> SqliteMemory:
        """The store for `project` under the data home `home` (the plugin entry point)."""
        return cls(home / "memory", project)

    # -- the connection -----------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.is_file()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3

            private_dirs(self.path.parent)
            fresh = not self.path.exists()
            if fresh:  # created owner-only before SQLite opens it
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            os.chmod(self.path, 0o600)
            self._db.executescript("""
                CREATE TABLE IF NOT EXISTS entries (
                    id INTEGER PRIMARY KEY, text TEXT NOT NULL, source TEXT, why TEXT,
                    state TEXT, scope TEXT, task TEXT, step INTEGER, created REAL,
                    files TEXT, key TEXT, updated REAL);
                CREATE INDEX IF NOT EXISTS by_scope ON entries(scope, state);
                CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts
                    USING fts5(text, tokenize='porter unicode61');
                CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
            """)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            for side in ("-wal", "-shm"):  # SQLite makes these with the umask's mode
                if os.path.exists(f"{self.path}{side}"):
                    os.chmod(f"{self.path}{side}", 0o600)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def _scope(self) -> str:
        return f"project:{self.project}"

    def _scope_of(self, entry: MemoryEntry) -> str:
        return "user" if entry.scope == "user" else self._scope

    def _entry(self, row: tuple[Any, ...]) -> MemoryEntry:
        values = dict(zip(_COLUMNS, row, strict=True))
        values["scope"] = "user" if values["scope"] == "user" else "project"
        values["files"] = json.loads(values["files"] or "{}")
        return MemoryEntry(**values)

    def _select(self, where: str, args: Iterable[Any] = ()) -> list[MemoryEntry]:
        if self._db is None and not self.exists():
            return []
        sql = (f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE scope IN (?, 'user') "
               f"AND {where} ORDER BY id")
        return [self._entry(r) for r in self._conn().execute(sql, (self._scope, *args))]

    # -- reading ------------------------------------------------------------------------

    def entries(self, state: str | None = None) -> list[MemoryEntry]:
        """Every entry of the project and the user, oldest first (of one `state` if given)."""
        if state is None:
            return self._select("1")
        return self._select("state = ?", (state,))

    def get(self, entry_id: int) -> MemoryEntry | None:
        found = self._select("id = ?", (entry_id,))
        return found[0] if found else None

    def keys(self) -> set[str]:
        """The dedup keys of every entry, rejected ones too (a rejected idea stays rejected)."""
        if self._db is None and not self.exists():
            return set()
        rows = self._conn().execute("SELECT key FROM entries WHERE scope IN (?, 'user')",
                                    (self._scope,))
        return {r[0] for r in rows}

    def search(self, query: str, limit: int) -> list[MemoryEntry]:
        """Accepted entries relevant to `query`, the most relevant (BM25) first."""
        match = fts_query(query)
        if limit <= 0 or not match or (self._db is None and not self.exists()):
            return []
        sql = (f"SELECT {', '.join('e.' + c for c in _COLUMNS)} FROM entries_fts "
               "JOIN entries e ON e.id = entries_fts.rowid WHERE entries_fts MATCH ? "
               "AND e.state = 'accepted' AND e.scope IN (?, 'user') "
               "ORDER BY bm25(entries_fts) LIMIT ?")
        return [self._entry(r) for r in self._conn().execute(sql, (match, self._scope, limit))]

    # -- writing ------------------------------------------------------------------------

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        """Store a new entry; it comes back with its id."""
        db = self._conn()
        now = time.time()
        with _transaction(db):
            cur = db.execute(
                "INSERT INTO entries (text, source, why, state, scope, task, step, created, "
                "files, key, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry.text, entry.source, entry.why, entry.state, self._scope_of(entry),
                 entry.task, entry.step, entry.created, json.dumps(entry.files), entry.key, now))
            entry.id = int(cur.lastrowid or 0)
            db.execute("INSERT INTO entries_fts (rowid, text) VALUES (?, ?)",
                       (entry.id, entry.text))
        return entry

    def update(self, entry: MemoryEntry) -> None:
        """Write an entry's text, state, scope and files back."""
        db = self._conn()
        with _transaction(db):
            db.execute("UPDATE entries SET text = ?, state = ?, scope = ?, files = ?, "
                       "updated = ? WHERE id = ?",
                       (entry.text, entry.state, self._scope_of(entry), json.dumps(entry.files),
                        time.time(), entry.id))
            db.execute("DELETE FROM entries_fts WHERE rowid = ?", (entry.id,))
            db.execute("INSERT INTO entries_fts (rowid, text) VALUES (?, ?)",
                       (entry.id, entry.text))

    def delete(self, entry_id: int) -> None:
        db = self._conn()
        with _transaction(db):
            db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
            db.execute("DELETE FROM entries_fts WHERE rowid = ?", (entry_id,))


class _transaction:
    """BEGIN IMMEDIATE … COMMIT (ROLLBACK on an error): writers from two runs take turns."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
