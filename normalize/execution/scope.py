"""Scopes: nested containers of steps with their own strategies, notes and history.

A scope carries three strategies. A nested scope inherits each one from its
parent unless it sets that one key itself:

    key       set on the scope              not set             at the root (unset)
    context   this scope and below use it   the parent's value  task_tree
    cache     this scope and below use it   the parent's value  persistent
    retry     this scope and below use it   the parent's value  none

A value replaces the parent's whole value: a retry or cache table is never
merged key by key. A step's own `retry` (or `context`, `cache`) applies to
that step alone.

A scope also keeps notes and a history. A note lives until its scope ends,
for N more results (`turns`), or until a result matches a regex (`until`);
a scope sees its own notes and its ancestors'. The history lists what ran in
the scope (command, status, a short preview), bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from normalize.errors import ConfigError
from normalize.retry import RetryPolicy
from normalize.serial import Record
from normalize.tables import CONTEXT_STRATEGIES

ROOT_CONTEXT = "task_tree"
ROOT_CACHE = "persistent"
ROOT_RETRY = "none"

HISTORY_LIMIT = 20
PREVIEW_CHARS = 200

JSON = dict[str, Any]


def _table(value: str | Mapping[str, Any] | RetryPolicy | None, what: str) -> JSON | None:
    """A strategy given as a name, a table or a RetryPolicy → a plain table."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"strategy": value}
    if isinstance(value, RetryPolicy):
        table: JSON = {"strategy": value.strategy, "max_attempts": value.max_attempts,
                       "base_delay": value.base_delay, "max_delay": value.max_delay}
        if value.jitter:
            table["jitter"] = value.jitter
        return table
    if isinstance(value, Mapping):
        return dict(value)
    raise ConfigError(f"{what} must be a name or a table, not {type(value).__name__}")


@dataclass(frozen=True)
class ScopeSettings:
    """What one scope sets itself; `None` means "inherit from the parent"."""

    context: str | None = None
    cache: JSON | None = None
    retry: JSON | None = None

    @classmethod
    def of(cls, context: str | None = None,
           cache: str | Mapping[str, Any] | None = None,
           retry: str | Mapping[str, Any] | RetryPolicy | None = None) -> ScopeSettings:
        """Settings from names, tables or a RetryPolicy."""
        if context is not None and context not in CONTEXT_STRATEGIES:
            raise ConfigError(f"unknown context strategy {context!r} "
                              f"(choose from {', '.join(CONTEXT_STRATEGIES)})")
        return cls(context, _table(cache, "cache"), _table(retry, "retry"))


@dataclass(frozen=True)
class Resolved:
    """The strategies in effect in a scope, after inheritance."""

    context: str = ROOT_CONTEXT
    cache: JSON = field(default_factory=lambda: {"strategy": ROOT_CACHE})
    retry: JSON = field(default_factory=lambda: {"strategy": ROOT_RETRY})

    def inherit(self, child: ScopeSettings) -> Resolved:
        """The settings of a child scope: each key the child sets replaces the parent's."""
        return Resolved(
            context=child.context if child.context is not None else self.context,
            cache=dict(child.cache) if child.cache is not None else self.cache,
            retry=dict(child.retry) if child.retry is not None else self.retry,
        )

    @property
    def retry_policy(self) -> RetryPolicy:
        table = dict(self.retry)
        table.setdefault("strategy", ROOT_RETRY)
        if table["strategy"] != "none":
            table.setdefault("max_attempts", 3)
        return RetryPolicy.from_config(table)

    def to_dict(self) -> JSON:
        return {"context": self.context, "cache": dict(self.cache), "retry": dict(self.retry)}


def resolve(chain: Iterable[ScopeSettings], root: Resolved | None = None) -> Resolved:
    """Apply the settings of each scope from the outermost to the innermost."""
    resolved = root or Resolved()
    for settings in chain:
        resolved = resolved.inherit(settings)
    return resolved


# -- notes and history -------------------------------------------------------


@dataclass
class Note(Record):
    """A piece of information with a lifetime.

    With `turns`, it lasts that many more results; with `until`, it lasts
    until a result's text matches that regex; with neither, until its scope ends.
    """

    text: str
    turns: int | None = None
    until: str | None = None

    def __post_init__(self) -> None:
        if self.turns is not None and self.turns < 1:
            raise ConfigError(f"a note's turns must be at least 1, not {self.turns}")
        if self.until is not None:
            try:
                re.compile(self.until)
            except re.error as exc:
                raise ConfigError(f"invalid regex {self.until!r} in a note: {exc}") from None

    @property
    def lifetime(self) -> str:
        if self.turns is not None:
            return f"{self.turns} more turn{'s' if self.turns != 1 else ''}"
        if self.until is not None:
            return f"until a result matches {self.until!r}"
        return "until the scope ends"

    def after(self, result_text: str) -> bool:
        """Age the note by one result; whether it is still alive."""
        if self.until is not None and re.search(self.until, result_text, re.MULTILINE):
            return False
        if self.turns is not None:
            self.turns -= 1
            return self.turns > 0
        return True



@dataclass
class HistoryEntry(Record):
    """One thing that ran in a scope."""

    command: str
    status: str
    preview: str = ""
    step: str = ""



@dataclass
class ScopeState(Record):
    """The run-time part of a scope: its notes and history (plain data)."""

    name: str = ""
    notes: list[Note] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)

    def note(self, text: str, *, turns: int | None = None, until: str | None = None) -> Note:
        note = Note(text, turns, until)
        self.notes.append(note)
        return note

    def record(self, command: str, status: str, output: str = "", step: str = "") -> None:
        """Add a history entry (bounded to the last HISTORY_LIMIT)."""
        preview = " ".join(output.split())[:PREVIEW_CHARS]
        self.history.append(HistoryEntry(command, status, preview, step))
        del self.history[:-HISTORY_LIMIT]

    def age(self, result_text: str) -> list[Note]:
        """Age every note by one result; returns the notes that expired."""
        alive: list[Note] = []
        gone: list[Note] = []
        for note in self.notes:
            (alive if note.after(result_text) else gone).append(note)
        self.notes = alive
        return gone



def record_history(data: Mapping[str, Any], command: str, status: str, output: str = "",
                   step: str = "") -> JSON:
    """A scope's plain-data state with one more history entry (the hot path of a workflow)."""
    preview = " ".join(output.split())[:PREVIEW_CHARS]
    history = [*data.get("history", ())[-(HISTORY_LIMIT - 1):],
               HistoryEntry(command, status, preview, step).to_dict()]
    return {"name": data.get("name", ""), "notes": list(data.get("notes", ())),
            "history": history}


def render_notes(notes: Iterable[Note]) -> str:
    """Notes as lines for a prompt or a `{notes}` variable."""
    return "\n".join(f"- {n.text}" for n in notes)


# -- the Scope primitive -----------------------------------------------------


class Scope:
    """A container of steps with its own strategies, notes and history.

    Used two ways: as a node of a Python workflow (`Scope(Step(...), context=
    "flat")`, compiled by `normalize.workflow.flow`), and directly, as a live
    scope tree (`scope.child(cache="none")`, `scope.note(...)`).
    """

    def __init__(
        self,
        *body: object,
        name: str | None = None,
        context: str | None = None,
        cache: str | Mapping[str, Any] | None = None,
        retry: str | Mapping[str, Any] | RetryPolicy | None = None,
        notes: Iterable[Note | str] = (),
        parent: Scope | None = None,
    ) -> None:
        self.body: list[object] = list(body)
        self.name = name
        self.settings = ScopeSettings.of(context, cache, retry)
        self.parent = parent
        self.state = ScopeState(name or "")
        for note in notes:
            self.state.notes.append(Note(note) if isinstance(note, str) else note)
        for child in self.body:
            if isinstance(child, Scope) and child.parent is None:
                child.parent = self

    def __repr__(self) -> str:
        return f"Scope(name={self.name!r}, {self.settings}, body={len(self.body)})"

    # -- inheritance -------------------------------------------------------

    def chain(self) -> list[Scope]:
        """This scope's ancestors and itself, outermost first."""
        out: list[Scope] = []
        scope: Scope | None = self
        while scope is not None:
            out.append(scope)
            scope = scope.parent
        return out[::-1]

    @property
    def resolved(self) -> Resolved:
        return resolve(s.settings for s in self.chain())

    @property
    def context(self) -> str:
        return self.resolved.context

    @property
    def cache(self) -> JSON:
        return self.resolved.cache

    @property
    def retry(self) -> RetryPolicy:
        return self.resolved.retry_policy

    def child(self, *body: object, name: str | None = None, context: str | None = None,
              cache: str | Mapping[str, Any] | None = None,
              retry: str | Mapping[str, Any] | RetryPolicy | None = None) -> Scope:
        """A nested scope: it inherits every strategy it does not set."""
        return Scope(*body, name=name, context=context, cache=cache, retry=retry, parent=self)

    # -- notes and history --------------------------------------------------

    def note(self, text: str, *, turns: int | None = None, until: str | None = None) -> Note:
        """Keep a note in this scope (see `Note` for lifetimes)."""
        return self.state.note(text, turns=turns, until=until)

    @property
    def notes(self) -> list[Note]:
        """The notes this scope sees: its ancestors' first, then its own."""
        return [n for s in self.chain() for n in s.state.notes]

    @property
    def history(self) -> list[HistoryEntry]:
        return list(self.state.history)

    def record(self, command: str, status: str, output: str = "") -> None:
        """Something ran here: add it to the history and age every visible note."""
        self.state.record(command, status, output)
        for scope in self.chain():
            scope.state.age(output)

    def close(self) -> list[Note]:
        """End the scope: its notes go (they lived "until the scope ends" at most)."""
        gone, self.state.notes = self.state.notes, []
        return gone
