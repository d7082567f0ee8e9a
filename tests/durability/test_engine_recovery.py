"""Recovery through the library API: results fed back once, hand-over history, interrupted text."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, RunContext
from normalize.engine import OUTCOME_UNKNOWN, Engine
from normalize.execution.cache import NoCache
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.guard import WorkspaceGuard


class AppendTool:
    """A side effect: appends its argument to log.txt."""

    name: ClassVar[str] = "append"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "append a line"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        with open(ctx.workspace / "log.txt", "a") as fh:
            fh.write(action.args[0] + "\n")
        return ActionResult.success("appended")


class CountingDriver:
    """One decision of two side effects; counts the results it hears (in its state)."""

    name: ClassVar[str] = "counting"
    fail_on: str | None = None

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.decided = False
        self.history: list[dict[str, Any]] | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> CountingDriver:
        return cls()

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.decided:
            return None
        self.decided = True
        return Decision(actions=[Action("append", {"args": [w]}, text=f"append {w}")
                                 for w in ("one", "two")])

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        if action.args[0] == self.fail_on:
            raise ValueError("driver bug")
        self.heard.append(f"{action.args[0]}:{result.status.value}")

    def snapshot(self) -> dict[str, Any]:
        return {"heard": list(self.heard), "decided": self.decided}

    def restore(self, state: dict[str, Any]) -> None:
        self.heard = list(state["heard"])
        self.decided = state["decided"]

    def adopt(self, history: list[dict[str, Any]]) -> None:
        self.history = history


def engine(tmp_path: Path, home: Path) -> tuple[Engine, TaskStore]:
    store = TaskStore(home, fsync=False)
    ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=NoCache(),
                      policy=ApprovalPolicy(mode="yes"))
    return Engine(store, ToolRegistry([AppendTool()]), ctx), store


def test_a_run_that_fails_mid_decision_never_feeds_a_result_twice(
        tmp_path: Path, normalize_home: Path) -> None:
    eng, store = engine(tmp_path, normalize_home)
    first = CountingDriver()
    first.fail_on = "two"  # heard `one`, then broke on `two`: the decision is still out
    task = Task.new("g", str(tmp_path), "counting")
    outcome = eng.run(task, first)
    assert outcome.status is TaskStatus.FAILED and "driver bug" in (outcome.error or "")
    saved = store.load(task.id)
    assert saved.inflight is not None
    assert saved.driver_state["heard"] == []  # the state of the in-flight checkpoint
    second = CountingDriver()
    done = eng.run(saved, second, resumed=True)
    assert done.status is TaskStatus.DONE
    assert second.heard == ["one:success", "two:success"]  # each exactly once
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\n"  # and nothing ran again


def test_a_driver_taking_over_can_adopt_the_history(tmp_path: Path,
                                                    normalize_home: Path) -> None:
    eng, store = engine(tmp_path, normalize_home)
    task = Task.new("g", str(tmp_path), "counting")
    eng.run(task, CountingDriver())
    saved = store.load(task.id)
    saved.status = TaskStatus.INTERRUPTED
    store.save(saved)
    saved.driver = "other"
    newcomer = CountingDriver()
    newcomer.decided = True
    eng.run(saved, newcomer, resumed=True)
    assert newcomer.history is not None
    assert [(h["command"], h["status"]) for h in newcomer.history] == [
        ("append one", "success"), ("append two", "success")]
    assert set(store.load(task.id).driver_states) == {"counting", "other"}


def test_the_interrupted_result_tells_the_driver_plainly(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    eng, store = engine(tmp_path, normalize_home)
    task = Task.new("g", str(tmp_path), "counting")
    first = CountingDriver()
    first.fail_on = "two"
    eng.run(task, first)
    # as if the process had died while `two` ran: journal it as started, not finished
    saved = store.load(task.id)
    offset = saved.journal_offset
    with open(store.journal_path(task.id), "rb") as fh:
        events = fh.read()[offset:].decode().splitlines()
    kept = [e for e in events if '"action_finished"' not in e or '"key":"0.1"' not in e]
    with open(store.journal_path(task.id), "r+b") as fh:
        fh.seek(offset)
        fh.truncate()
        fh.write(("\n".join(kept) + "\n").encode())
    results: list[ActionResult] = []

    class Listening(CountingDriver):
        def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
            results.append(result)
            super().on_result(task, action, result)

    eng.run(saved, Listening(), resumed=True)
    interrupted = [r for r in results if r.status is ResultStatus.INTERRUPTED]
    assert len(interrupted) == 1
    assert interrupted[0].error == OUTCOME_UNKNOWN
    assert interrupted[0].output.startswith("`append two`: outcome unknown")
