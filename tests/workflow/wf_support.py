"""Shared pieces of the workflow tests: a finished run and the runner fixture's type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from normalize.engine import RunOutcome
from normalize.events import BaseEvent


@dataclass
class Run:
    """A finished run: its outcome and every event it emitted."""

    outcome: RunOutcome
    events: list[BaseEvent] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    @property
    def results(self) -> list[tuple[str, str]]:
        """(command, status) of every finished action, in order."""
        return [(e.command, e.status) for e in self.of("action_finished")]  # type: ignore[attr-defined]

    @property
    def why(self) -> str:
        """What a failed run said: its summary and each action that did not end ok."""
        failed = [f"{e.command[:60]} -> {e.status} exit {e.exit_code}: "
                  f"{e.error or e.preview[-300:]}"
                  for e in self.of("action_finished") if e.status != "ok"]
        return "\n".join([f"summary: {self.outcome.summary}", *failed])


Runner = Callable[..., Run]
