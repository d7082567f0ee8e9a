"""Helpers for the checkpoint tests: scripted agent tasks and the `normalize` CLI."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from support.cli import cli as run_cli

from normalize.contract.driver import DriverServices
from normalize.engine import RunOutcome
from normalize.events import BaseEvent
from normalize.providers.scripted import ScriptedTurn
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.tables import LLMTable
from normalize.testing import ScriptedModel

PY = sys.executable
VENV_BIN = str(Path(sys.executable).parent)


def edit(path: str, old: str, new: str) -> str:
    """A model reply that edits `path` with one SEARCH/REPLACE block."""
    return (f"Editing {path}.\nedit {path} <<EOF\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n"
            ">>>>>>> REPLACE\nEOF")


def program(code: str) -> str:
    """A model reply that runs a Python program (its code is one argument)."""
    quoted = code.replace("'", "'\"'\"'")
    return f"Running a program.\nrun {PY} -c '{quoted}'"


@dataclass
class Done:
    outcome: RunOutcome
    events: list[BaseEvent]
    store: TaskStore

    @property
    def task_id(self) -> str:
        return self.outcome.task.id

    def of(self, kind: str) -> list[BaseEvent]:
        return [e for e in self.events if e.type == kind]


def run_scripted(workspace: Path, home: Path, *replies: ScriptedTurn, **run_options: Any) -> Done:
    """Run the dwim workflow with a scripted model (side effects approved) to its end."""
    store = TaskStore(home, fsync=False)
    events: list[BaseEvent] = []
    model = ScriptedModel(list(replies), model="test")
    opts = RunOptions(workspace=workspace, subscribers=[events.append], store=store,
                      fsync=False, approve="yes",
                      services=DriverServices(model_factory=lambda spec, **_: model),
                      **run_options)
    spec = load_spec("dwim", workspace)
    spec.llm = replace(spec.llm or LLMTable(), fallback=())
    task = start_task(spec, "change some files", opts)
    outcome = run_task(task, opts)
    assert model.remaining == 0, (outcome.status, outcome.error, outcome.summary,
                                  [e.to_dict() for e in events if e.type == "notice"])
    return Done(outcome, events, store)


cli = partial(run_cli, drop=(), term=None, first_on_path=VENV_BIN, timeout=120)
"""`normalize ARGS` in a subprocess, with its own NORMALIZE_HOME (`support.cli`)."""
