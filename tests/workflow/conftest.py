"""Fixtures for the workflow tests: run a spec or a flow in a temporary workspace."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from normalize.contract.driver import DriverServices
from normalize.events import BaseEvent
from normalize.runner import RunOptions, run_task, start_task
from normalize.store import TaskStore
from normalize.workflow.loader import load_workflow
from normalize.workflow.spec import WorkflowSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spine"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from wf_support import Run, Runner


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def options_for(normalize_home: Path) -> Callable[..., RunOptions]:
    def build(workspace: Path, events: list[BaseEvent], **kw: Any) -> RunOptions:
        return RunOptions(workspace=workspace, subscribers=[events.append], approve="yes",
                          store=TaskStore(normalize_home, fsync=False), **kw)

    return build


@pytest.fixture
def run_spec(workspace: Path, options_for: Callable[..., RunOptions]) -> Runner:
    """Run a WorkflowSpec (or a TOML text / file) to its end."""

    def run(spec: WorkflowSpec | str | Path, *, goal: str = "goal",
            services: DriverServices | None = None, **kw: Any) -> Run:
        if isinstance(spec, str):
            path = workspace.parent / "wf.toml"
            path.write_text(spec)
            spec = path
        if isinstance(spec, Path):
            spec = load_workflow(spec)
        events: list[BaseEvent] = []
        options = options_for(workspace, events, **kw)
        if services is not None:
            options.services = services
        task = start_task(spec, goal, options)
        return Run(run_task(task, options), events)

    return run
