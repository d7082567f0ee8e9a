"""The engine loop, its exit door, parallel dispatch and checkpoints, through the library API."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from normalize.cancel import CancelToken
from normalize.contract.driver import DriverServices, RunContext
from normalize.engine import Engine
from normalize.events import BaseEvent
from normalize.execution.cache import NoCache
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Decision, Limits, Task, TaskStatus
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.guard import WorkspaceGuard


class ClockTool:
    """A read-only tool that records when it ran and sleeps a little."""

    name: ClassVar[str] = "clock"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "records its start and end"

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        start = time.monotonic()
        time.sleep(0.2)
        with self.lock:
            self.spans.append((start, time.monotonic()))
        return ActionResult.success(f"tick {action.args}")


class ScriptDriver:
    """Returns the decisions it was given, one per turn; records results."""

    name: ClassVar[str] = "script"

    def __init__(self, decisions: list[Decision]) -> None:
        self.decisions = decisions
        self.results: list[tuple[str, str]] = []
        self.index = 0

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> ScriptDriver:
        return cls([])

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.index >= len(self.decisions):
            return None
        self.index += 1
        return self.decisions[self.index - 1]

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        self.results.append((action.text, result.status.value))

    def snapshot(self) -> dict[str, Any]:
        return {"index": self.index, "pad": "x" * 100}

    def restore(self, state: dict[str, Any]) -> None:
        self.index = state["index"]


def make_engine(tmp_path: Path, home: Path, tool: Any, events: list[BaseEvent],
                cancel: CancelToken | None = None) -> tuple[Engine, TaskStore]:
    store = TaskStore(home, fsync=False)
    ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=NoCache(),
                      policy=ApprovalPolicy(mode="yes"))
    engine = Engine(store, ToolRegistry([tool]), ctx, subscribers=[events.append],
                    cancel=cancel)
    return engine, store


def clock(n: int) -> Action:
    return Action("clock", {"args": [str(n)]}, text=f"clock {n}")


def test_parallel_read_only_actions_overlap_and_keep_their_order(
        tmp_path: Path, normalize_home: Path) -> None:
    tool, events = ClockTool(), []
    engine, _ = make_engine(tmp_path, normalize_home, tool, events)
    driver = ScriptDriver([Decision(actions=[clock(i) for i in range(4)], parallel=True)])
    task = Task.new("parallel", str(tmp_path), "script")
    outcome = engine.run(task, driver)
    assert outcome.status is TaskStatus.DONE
    starts = [s for s, _ in tool.spans]
    ends = [e for _, e in tool.spans]
    assert max(starts) < min(ends)  # all four ran at the same time
    assert [text for text, _ in driver.results] == [f"clock {i}" for i in range(4)]


def test_sequential_actions_do_not_overlap(tmp_path: Path, normalize_home: Path) -> None:
    tool, events = ClockTool(), []
    engine, _ = make_engine(tmp_path, normalize_home, tool, events)
    driver = ScriptDriver([Decision(actions=[clock(i) for i in range(3)])])
    engine.run(Task.new("seq", str(tmp_path), "script"), driver)
    spans = sorted(tool.spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_max_turns_ends_with_limit_and_one_run_ended(tmp_path: Path,
                                                     normalize_home: Path) -> None:
    tool, events = ClockTool(), []
    engine, store = make_engine(tmp_path, normalize_home, tool, events)
    driver = ScriptDriver([Decision(actions=[clock(i)]) for i in range(5)])
    task = Task.new("limited", str(tmp_path), "script", limits=Limits(max_turns=2))
    outcome = engine.run(task, driver)
    assert outcome.status is TaskStatus.LIMIT
    assert int(outcome.exit_status) == 3
    assert [e.type for e in events].count("run_ended") == 1
    assert events[-1].type == "run_ended"
    assert store.load(task.id).status is TaskStatus.LIMIT
    # the lock is released: a new run can take the task
    more = engine.run(store.load(task.id), driver, resumed=True)
    assert more.status is TaskStatus.LIMIT


def test_events_are_stamped_in_order_and_journaled(tmp_path: Path,
                                                   normalize_home: Path) -> None:
    tool, events = ClockTool(), []
    engine, store = make_engine(tmp_path, normalize_home, tool, events)
    task = Task.new("journal", str(tmp_path), "script")
    engine.run(task, ScriptDriver([Decision(actions=[clock(1)]), Decision.finish("ok")]))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(e.task_id == task.id for e in events)
    journaled = list(store.events(task.id))
    assert [j["seq"] for j in journaled] == [e.seq for e in events]
    assert [j["type"] for j in journaled][:2] == ["run_started", "checkpoint_saved"]


def test_cancel_before_a_decision_interrupts_and_rearms(tmp_path: Path,
                                                        normalize_home: Path) -> None:
    tool, events = ClockTool(), []
    cancel = CancelToken()
    engine, _ = make_engine(tmp_path, normalize_home, tool, events, cancel)

    class CancellingDriver(ScriptDriver):
        def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
            super().on_result(task, action, result)
            cancel.cancel("test")

    driver = CancellingDriver([Decision(actions=[clock(i)]) for i in range(3)])
    outcome = engine.run(Task.new("cancel", str(tmp_path), "script"), driver)
    assert outcome.status is TaskStatus.INTERRUPTED
    assert int(outcome.exit_status) == 130
    assert len(driver.results) == 1
    assert not cancel.cancelled  # re-armed by finalize


def test_checkpoint_size_does_not_grow_with_history(tmp_path: Path,
                                                    normalize_home: Path) -> None:
    class NoteTool:
        name: ClassVar[str] = "clock"
        read_only: ClassVar[bool] = True
        summary: ClassVar[str] = "no-op"

        def run(self, action: Action, ctx: ToolContext) -> ActionResult:
            return ActionResult.success("ok")

    events: list[BaseEvent] = []
    engine, _ = make_engine(tmp_path, normalize_home, NoteTool(), events)
    driver = ScriptDriver([Decision(actions=[clock(i)]) for i in range(300)])
    engine.run(Task.new("long", str(tmp_path), "script"), driver)
    sizes = [e.bytes for e in events if e.type == "checkpoint_saved"]  # type: ignore[attr-defined]
    assert len(sizes) > 300
    assert max(sizes[10:]) - min(sizes[10:]) < 16  # only counters change width


def test_a_broken_driver_fails_the_task_with_one_line(tmp_path: Path,
                                                      normalize_home: Path) -> None:
    class BrokenDriver(ScriptDriver):
        def decide(self, task: Task, ctx: RunContext) -> Decision | None:
            raise ValueError("boom")

    events: list[BaseEvent] = []
    engine, store = make_engine(tmp_path, normalize_home, ClockTool(), events)
    task = Task.new("broken", str(tmp_path), "script")
    outcome = engine.run(task, BrokenDriver([]))
    assert outcome.status is TaskStatus.FAILED
    assert outcome.error == "internal error: ValueError: boom"
    assert store.load(task.id).status is TaskStatus.FAILED


@pytest.mark.parametrize("status", ["failed", "done"])
def test_a_decision_can_end_the_task_with_a_status(tmp_path: Path, normalize_home: Path,
                                                   status: str) -> None:
    events: list[BaseEvent] = []
    engine, _ = make_engine(tmp_path, normalize_home, ClockTool(), events)
    decision = Decision.finish("because", TaskStatus(status))
    outcome = engine.run(Task.new("x", str(tmp_path), "script"), ScriptDriver([decision]))
    assert outcome.status.value == status
    assert events[-1].to_dict()["summary"] == "because"
