"""A stranger's plugin that declares a capability gets the behaviour, and one that does not
(or declares it false) gets the default: each flag is read, never guessed from a name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from normalize import RunOptions, load_spec, run_task, start_task
from normalize.contract.driver import DriverServices, RunContext
from normalize.engine import Engine
from normalize.execution.cache import MemoryCache
from normalize.plugins import use_entry_points
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.guard import WorkspaceGuard

HERE = __name__  # the name pytest imported this module under


class ThreeTurns:
    """A stranger's driver: three empty decisions, then done. It declares nothing."""

    name: ClassVar[str] = "three-turns"

    def __init__(self) -> None:
        self.turns = 0

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> ThreeTurns:
        del config, services
        return cls()

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        del task, ctx
        self.turns += 1
        return Decision() if self.turns <= 3 else None

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del task, action, result

    def snapshot(self) -> dict[str, Any]:
        return {"turns": self.turns}

    def restore(self, state: dict[str, Any]) -> None:
        self.turns = int(state["turns"])


class Unbound(ThreeTurns):
    bound_by_limits: ClassVar[bool] = False


class SaysBound(ThreeTurns):
    bound_by_limits: ClassVar[bool] = True


@pytest.mark.parametrize(("driver", "status", "turns"), [
    ("ThreeTurns", "limit_reached", 1), ("SaysBound", "limit_reached", 1), ("Unbound", "done", 3)])
def test_a_plugin_driver_declaring_it_is_not_bound_by_limits_runs_past_them(
        tmp_path: Path, driver: str, status: str, turns: int) -> None:
    (tmp_path / "wf.toml").write_text('[workflow]\nname = "w"\ndriver = "stranger-x"\n'
                                      "[workflow.limits]\nmax_turns = 1\n")
    with use_entry_points({"normalize.drivers": {"stranger-x": f"{HERE}:{driver}"}}):
        options = RunOptions(workspace=tmp_path)
        outcome = run_task(start_task(load_spec(str(tmp_path / "wf.toml"), tmp_path), "",
                                      options), options)
    assert (outcome.task.status.value, outcome.task.turn) == (status, turns), outcome.task.error


class AppendTool:
    """A side effect: appends its argument to log.txt."""

    name: ClassVar[str] = "append"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "append a line"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        with open(ctx.workspace / "log.txt", "a") as fh:
            fh.write(action.args[0] + "\n")
        return ActionResult.success("appended")


class OneDecision:
    """A stranger's driver: one decision of three appends; it breaks on hearing the first."""

    name: ClassVar[str] = "one-decision"

    def __init__(self) -> None:
        self.decided = False
        self.heard: list[str] = []
        self.broken = True

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> OneDecision:
        del config, services
        return cls()

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        del task, ctx
        if self.decided:
            return None
        self.decided = True
        return Decision(actions=[Action("append", {"args": [w]}, text=f"append {w}")
                                 for w in ("one", "two", "three")])

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del task
        if self.broken:
            raise ValueError("driver bug")  # the run fails with its decision in flight
        self.heard.append(f"{action.args[0]}:{result.status.value}")

    def snapshot(self) -> dict[str, Any]:
        return {"decided": self.decided}

    def restore(self, state: dict[str, Any]) -> None:
        self.decided = bool(state["decided"])


class Redeciding(OneDecision):
    redecides_on_resume: ClassVar[bool] = True


class SaysNoRedecide(OneDecision):
    @property
    def redecides_on_resume(self) -> bool:
        return False


@pytest.mark.parametrize(("cls", "ran", "heard"), [
    (OneDecision, "one\nthree\n", ["one:success", "two:interrupted", "three:success"]),
    (SaysNoRedecide, "one\nthree\n", ["one:success", "two:interrupted", "three:success"]),
    (Redeciding, "one\n", ["one:success", "two:interrupted", "three:cancelled"]),
])
def test_a_plugin_driver_declaring_it_redecides_runs_nothing_more_of_a_troubled_decision(
        tmp_path: Path, normalize_home: Path, cls: type[OneDecision], ran: str,
        heard: list[str]) -> None:
    store = TaskStore(normalize_home, fsync=False)
    ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=MemoryCache(),
                      policy=ApprovalPolicy(mode="yes"))
    engine = Engine(store, ToolRegistry([AppendTool()]), ctx)
    task = Task.new("g", str(tmp_path), cls.name)
    assert engine.run(task, cls()).status is TaskStatus.FAILED  # broke on hearing `one`
    saved = store.load(task.id)
    assert saved.inflight is not None and (tmp_path / "log.txt").read_text() == "one\n"
    # as if the process had died while `two` ran: its start journaled, nothing after it
    with open(store.journal_path(task.id), "a") as fh:
        fh.write(json.dumps({"type": "action_started", "task_id": task.id, "seq": 9999,
                             "ts": 0, "turn": 0, "key": "0.1", "tool": "append",
                             "command": "append two", "read_only": False}) + "\n")
    again = cls()
    again.broken = False
    outcome = engine.run(saved, again, resumed=True)
    assert outcome.status is TaskStatus.DONE, outcome.error
    assert (tmp_path / "log.txt").read_text() == ran
    assert again.heard == heard


class Lines:
    """A stranger's read-only tool printing 300 numbered lines; it declares nothing."""

    name: ClassVar[str] = "lines"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "print lines"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del action, ctx
        return ActionResult.success("".join(f"line {i}\n" for i in range(300)))


class AskedLines(Lines):
    asked: ClassVar[bool] = True


class SaysNotAsked(Lines):
    asked: ClassVar[bool] = False


class SelfBounded(Lines):
    previewed: ClassVar[bool] = False


@pytest.mark.parametrize(("cls", "whole", "kept"), [
    (Lines, False, True), (SaysNotAsked, False, True), (AskedLines, True, True),
    (SelfBounded, True, False)])
def test_a_tool_declaring_how_its_output_is_sized_gets_it_sized_so(
        tmp_path: Path, cls: type[Lines], whole: bool, kept: bool) -> None:
    ctx = ToolContext(workspace=tmp_path, guard=WorkspaceGuard(tmp_path), cache=MemoryCache(),
                      policy=ApprovalPolicy(mode="yes"))
    result = ToolRegistry([cls()]).execute(Action("lines", {"args": []}, text="lines"), ctx)
    assert result.status is ResultStatus.SUCCESS
    assert (result.shown == result.output) is whole
    assert (result.cache_id is not None) is kept


class Together(AppendTool):
    concurrent: ClassVar[bool] = True


class SaysApart(AppendTool):
    concurrent: ClassVar[bool] = False


def test_a_tool_runs_together_only_when_it_says_so() -> None:
    action = Action("append", {"args": ["x"]})
    assert ToolRegistry([Together()]).runs_together(action)
    assert not ToolRegistry([SaysApart()]).runs_together(action)
    assert not ToolRegistry([AppendTool()]).runs_together(action)
