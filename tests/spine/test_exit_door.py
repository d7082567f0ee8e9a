"""The single exit door holds: failing watchers, drivers and setups still end the run properly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from normalize.cancel import CancelToken
from normalize.contract.driver import DriverServices, RunContext
from normalize.engine import Engine
from normalize.events import BaseEvent, Notice, RunEnded
from normalize.execution.cache import NoCache
from normalize.intents import parse_command
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Decision, Task, TaskStatus
from normalize.tools import default_tools
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext
from normalize.tools.guard import WorkspaceGuard


class ListDriver:
    """Returns its decisions one per turn; records each result it hears."""

    name: ClassVar[str] = "list"

    def __init__(self, decisions: list[Decision]) -> None:
        self.decisions = decisions
        self.heard: list[tuple[str, str]] = []
        self.index = 0

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> ListDriver:
        return cls([])

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.index >= len(self.decisions):
            return None
        self.index += 1
        return self.decisions[self.index - 1]

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        self.heard.append((action.text, result.status.value))

    def snapshot(self) -> dict[str, Any]:
        return {"index": self.index}

    def restore(self, state: dict[str, Any]) -> None:
        self.index = state["index"]


class Flaky:
    """A watcher that breaks (RuntimeError, or a second Ctrl-C) at one event type."""

    def __init__(self, at: str, error: BaseException) -> None:
        self.at = at
        self.error = error
        self.seen: list[str] = []

    def __call__(self, event: BaseEvent) -> None:
        self.seen.append(event.type)
        if event.type == self.at:
            raise self.error


def make_engine(workspace: Path, home: Path, *subscribers: Any,
                cancel: CancelToken | None = None) -> tuple[Engine, TaskStore]:
    store = TaskStore(home, fsync=False)
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="yes"))
    return Engine(store, default_tools(), ctx, subscribers=subscribers, cancel=cancel), store


def lock_is_free(store: TaskStore, task_id: str) -> bool:
    lock = store.lock(task_id)
    try:
        lock.acquire(epoch=0)
    except Exception:
        return False
    lock.release()
    return True


def views(n: int) -> list[Decision]:
    return [Decision(actions=[parse_command(f"view f{i}.txt")]) for i in range(n)]


def test_a_watcher_that_raises_is_detached_and_the_run_finishes(tmp_path: Path,
                                                                normalize_home: Path) -> None:
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text(f"{i}\n")
    flaky, events = Flaky("action_finished", RuntimeError("screen gone")), list[BaseEvent]()
    engine, store = make_engine(tmp_path, normalize_home, flaky, events.append)
    driver = ListDriver(views(3))
    task = Task.new("watched", str(tmp_path), "list")
    outcome = engine.run(task, driver)
    assert outcome.status is TaskStatus.DONE
    assert [status for _, status in driver.heard] == ["success"] * 3
    assert flaky.seen.count("action_finished") == 1  # detached at its first failure
    message = "subscriber Flaky was detached: it raised RuntimeError: screen gone"
    journaled = [e for e in store.events(task.id) if e["type"] == "notice"]
    assert [e["message"] for e in journaled] == [message]
    assert [e.message for e in events if isinstance(e, Notice)] == [message]  # shown to others
    kinds = [e.type for e in events]  # the notice follows the event the watcher broke on
    assert kinds[kinds.index("notice") - 1] == "action_finished"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert store.load(task.id).status is TaskStatus.DONE


def test_a_watcher_raising_at_run_ended_leaves_the_task_saved_and_unlocked(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "f0.txt").write_text("0\n")
    cancel = CancelToken()
    flaky = Flaky("run_ended", RuntimeError("late"))
    engine, store = make_engine(tmp_path, normalize_home, flaky, cancel=cancel)

    class Cancelling(ListDriver):
        def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
            super().on_result(task, action, result)
            cancel.cancel("test")

    task = Task.new("late watcher", str(tmp_path), "list")
    outcome = engine.run(task, Cancelling(views(2)))
    assert outcome.status is TaskStatus.INTERRUPTED
    assert not cancel.cancelled and lock_is_free(store, task.id)
    assert store.load(task.id).status is TaskStatus.INTERRUPTED
    assert [e["type"] for e in store.events(task.id)][-2:] == ["run_ended", "notice"]


def test_a_second_ctrl_c_inside_run_ended_still_unlocks_and_rearms(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "f0.txt").write_text("0\n")
    cancel = CancelToken()
    engine, store = make_engine(tmp_path, normalize_home, Flaky("run_ended", KeyboardInterrupt()),
                                cancel=cancel)
    task = Task.new("interrupted while ending", str(tmp_path), "list")

    class Cancelling(ListDriver):
        def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
            cancel.cancel("test")

    with pytest.raises(KeyboardInterrupt):  # not a watcher's failure: it stops the process
        engine.run(task, Cancelling(views(2)))
    assert not cancel.cancelled and lock_is_free(store, task.id)
    assert store.load(task.id).status is TaskStatus.INTERRUPTED  # saved before the announcement


def test_a_driver_whose_snapshot_raises_fails_the_task_and_frees_the_lock(
        tmp_path: Path, normalize_home: Path) -> None:
    class Unsnappable(ListDriver):
        def snapshot(self) -> dict[str, Any]:
            raise TypeError("cannot copy a socket")

    events: list[BaseEvent] = []
    cancel = CancelToken()
    engine, store = make_engine(tmp_path, normalize_home, events.append, cancel=cancel)
    task = Task.new("unsnappable", str(tmp_path), "list")
    outcome = engine.run(task, Unsnappable(views(1)))
    assert outcome.status is TaskStatus.FAILED
    assert outcome.error is not None
    assert outcome.error.startswith("internal error: TypeError: cannot copy a socket")
    assert "cannot snapshot the driver" in outcome.error
    assert lock_is_free(store, task.id) and not cancel.cancelled
    assert store.load(task.id).status is TaskStatus.FAILED  # saved, with its last good state
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert len(ended) == 1 and ended[0].status == "failed"
    trace = events[-2]
    assert isinstance(trace, Notice) and "Traceback" in trace.message


def test_a_setup_failure_on_resume_ends_through_the_exit_door(tmp_path: Path,
                                                              normalize_home: Path) -> None:
    (tmp_path / "f0.txt").write_text("0\n")
    events: list[BaseEvent] = []
    engine, store = make_engine(tmp_path, normalize_home, events.append)
    task = Task.new("resumed", str(tmp_path), "list")
    assert engine.run(task, ListDriver([]), resumed=False).status is TaskStatus.DONE
    task = store.load(task.id)
    task.status = TaskStatus.INTERRUPTED
    store.save(task)
    journal = store.journal_path(task.id)
    journal.unlink()
    journal.mkdir()  # reading its tail (the first thing a resume does) fails
    events.clear()
    outcome = engine.run(store.load(task.id), ListDriver([]), resumed=True)
    assert outcome.status is TaskStatus.FAILED
    assert outcome.error is not None and "IsADirectoryError" in outcome.error
    assert lock_is_free(store, task.id)
    assert store.load(task.id).status is TaskStatus.FAILED
    assert [e.type for e in events if e.type == "run_ended"] == ["run_ended"]  # watchers hear it


def test_a_blocked_action_stops_the_rest_of_an_in_order_decision(tmp_path: Path,
                                                                 normalize_home: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = parse_command("write ../outside.txt <<EOF\nno\nEOF")
    inside = parse_command("write inside.txt <<EOF\nnot after a refusal\nEOF")
    engine, _ = make_engine(workspace, normalize_home)
    driver = ListDriver([Decision(actions=[outside, inside])])
    outcome = engine.run(Task.new("in order", str(workspace), "list"), driver)
    assert outcome.status is TaskStatus.DONE
    assert [status for _, status in driver.heard] == ["blocked", "cancelled"]
    assert not (tmp_path / "outside.txt").exists()
    assert not (workspace / "inside.txt").exists()


def test_an_error_stops_the_rest_of_an_in_order_decision_but_not_a_parallel_one(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "here.txt").write_text("1\n")
    missing, present = parse_command("view nowhere.txt"), parse_command("view here.txt")
    engine, _ = make_engine(tmp_path, normalize_home)
    in_order = ListDriver([Decision(actions=[missing, present])])
    engine.run(Task.new("in order", str(tmp_path), "list"), in_order)
    assert [status for _, status in in_order.heard] == ["error", "cancelled"]
    together = ListDriver([Decision(actions=[parse_command("view nowhere.txt"),
                                             parse_command("view here.txt")], parallel=True)])
    engine.run(Task.new("parallel", str(tmp_path), "list"), together)
    assert [status for _, status in together.heard] == ["error", "success"]


def test_a_run_that_lost_its_task_writes_nothing_and_still_lets_go(tmp_path: Path,
                                                                  normalize_home: Path) -> None:
    (tmp_path / "f0.txt").write_text("0\n")
    events: list[BaseEvent] = []
    cancel = CancelToken()
    engine, store = make_engine(tmp_path, normalize_home, events.append, cancel=cancel)
    task = Task.new("taken over", str(tmp_path), "list")
    owner = store.tasks_dir / f"{task.id}.owner"

    class LosingDriver(ListDriver):
        def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
            # another process takes the task over (as after a lost lock file), then we cancel
            owner.write_text(json.dumps({"pid": os.getpid() + 1, "epoch": 99}))
            cancel.cancel("test")

    saved: dict[str, bytes] = {}

    class Snapshotting(LosingDriver):
        def decide(self, task: Task, ctx: RunContext) -> Decision | None:
            saved["task"] = store.task_path(task.id).read_bytes()
            saved["journal"] = store.journal_path(task.id).read_bytes()
            return super().decide(task, ctx)

    outcome = engine.run(task, Snapshotting(views(1)))
    assert outcome.status is TaskStatus.FAILED
    assert outcome.error is not None and "taken over by process" in outcome.error
    assert store.task_path(task.id).read_bytes() == saved["task"]  # not one byte written
    journal = store.journal_path(task.id).read_bytes()
    assert journal.startswith(saved["journal"])
    after = [json.loads(line)["type"] for line in journal[len(saved["journal"]):].splitlines()]
    assert "run_ended" not in after and "checkpoint_saved" not in after
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert len(ended) == 1 and ended[0].summary == "stopped without saving"  # watchers hear it
    assert not cancel.cancelled and lock_is_free(store, task.id)
