"""Which journal writes are fsynced: a killed process cannot show a missing fsync, so we audit.

A real store whose journals report each write (`JournalWriter.on_append`)
runs a workflow of read-only steps, a side effect that starts a process, and
a model step that streams text.
"""

from __future__ import annotations

from pathlib import Path

from durability_support import append_action

from normalize.contract.driver import DriverServices
from normalize.events import BaseEvent
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.store.journal import JournalWriter
from normalize.testing import ScriptedModel


class AuditedStore(TaskStore):
    """A task store (fsync on) that records every journal write and whether it was fsynced."""

    def __init__(self, home: Path) -> None:
        super().__init__(home, fsync=True)
        self.writes: list[tuple[BaseEvent, bool]] = []

    def journal(self, task_id: str, *, redact: bool = True) -> JournalWriter:
        journal = super().journal(task_id, redact=redact)
        journal.on_append = lambda event, synced: self.writes.append((event, synced))
        return journal


def test_side_effects_and_their_processes_are_fsynced_and_nothing_else(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    flow = tmp_path / "audit.toml"
    flow.write_text(f"""
[workflow]
name = "audit"
[workflow.permissions]
mode = "yes"
[workflow.llm]
provider = "scripted"
model = "auditor"

[[workflow.steps]]
name = "look"
action = "view a.txt"

[[workflow.steps]]
name = "append"
action = '''{append_action("one")}'''

[[workflow.steps]]
name = "think"
action = "llm-decide"

[[workflow.steps]]
name = "search"
action = "grep alpha a.txt"
""")
    model = ScriptedModel(["Reading it once more.\nview a.txt", "done seen"])
    store = AuditedStore(normalize_home)
    seen: list[BaseEvent] = []
    options = RunOptions(workspace=tmp_path, store=store, subscribers=[seen.append],
                         services=DriverServices(model_factory=lambda spec, **kw: model))
    outcome = run_task(start_task(load_spec(str(flow), tmp_path), "", options), options)
    assert outcome.status.value == "done", outcome.error
    assert (tmp_path / "log.txt").read_text() == "one\n"

    durable = [(e.type, getattr(e, "tool", "")) for e, synced in store.writes if synced]
    assert durable == [("action_started", "run"), ("process_started", ""),
                       ("action_finished", "run"),
                       # a paid reply is kept for sure (resume and replay read it): one a turn
                       ("model_replied", ""), ("model_replied", "")]
    read_only = [(e.type, getattr(e, "tool", ""), synced) for e, synced in store.writes
                 if getattr(e, "tool", "run") != "run"]
    assert {tool for _, tool, _ in read_only} == {"view", "grep"}
    assert len(read_only) == 6 and not any(synced for _, _, synced in read_only)
    # streamed deltas reach the watchers but are never journaled, durably or not
    assert any(e.type == "text_delta" for e in seen)
    assert not any(e.transient for e, _ in store.writes)
    assert {e.type for e, _ in store.writes} >= {"run_started", "decision_made",
                                                 "checkpoint_saved", "model_replied", "run_ended"}
