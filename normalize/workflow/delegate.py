"""Handing a workflow's decisions to another driver while one step runs.

A step kind (`llm-decide`, or a plugin's) and a nested workflow file both run
as a *delegate*: the workflow or state-machine driver forwards `decide` and
`on_result` to a sub-driver until that sub-driver says it is done (or the
step's `max_turns` is reached). The sub-driver's state nests in the parent's
snapshot, with the config that rebuilds it, so a task resumes mid-step.

A step kind plugin (entry-point group `normalize.steps`) is a callable
`(config: dict, services: DriverServices) -> Driver`; `config` holds the
step's interpolated `args`, `prompt`, `max_turns`, the strategies in effect
(`context`, `cache`, `retry`), the workflow's `llm` table, the visible
`notes` and the variables (`vars`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from normalize.contract.driver import Driver, DriverServices, RunContext, create_driver
from normalize.errors import ConfigError
from normalize.task import Action, ActionResult, Decision, Task, TaskStatus

JSON = dict[str, Any]


@dataclass
class StepOutcome:
    """How a delegated step ended."""

    status: TaskStatus
    summary: str = ""

    @property
    def ok(self) -> bool:
        return self.status is TaskStatus.DONE

    def result(self) -> ActionResult:
        """The outcome as an action result, for conditions, captures and `on_error`."""
        if self.ok:
            return ActionResult.success(self.summary)
        why = self.summary or self.status.value
        return ActionResult.failure(why, output=self.summary)


def build_driver(kind: str, config: JSON, services: DriverServices) -> Driver:
    """The sub-driver for a delegate: a nested workflow, or a step kind's driver."""
    if kind == "workflow":
        from normalize.workflow.spec import WorkflowSpec

        spec = WorkflowSpec.from_dict(config["spec"])
        return create_driver(spec.driver, config, services)
    from normalize.workflow.steps import STEPS

    try:
        factory = STEPS.get(kind)
    except KeyError:
        raise ConfigError(f"unknown step kind {kind!r} (known: {', '.join(STEPS.names())})",
                          hint="; ".join(STEPS.warnings) or None) from None
    driver: Driver = factory(config, services)
    return driver


class Delegate:
    """A sub-driver running one step, bounded by the step's `max_turns`."""

    def __init__(self, kind: str, config: JSON, driver: Driver, *,
                 max_turns: int | None = None) -> None:
        self.kind = kind
        self.config = config
        self.driver = driver
        self.max_turns = max_turns
        self.turns = 0
        self.ending: StepOutcome | None = None

    @classmethod
    def start(cls, kind: str, config: JSON, services: DriverServices, *,
              max_turns: int | None = None) -> Delegate:
        return cls(kind, config, build_driver(kind, config, services), max_turns=max_turns)

    @classmethod
    def restore(cls, data: JSON, services: DriverServices) -> Delegate:
        delegate = cls.start(data["kind"], data["config"], services,
                             max_turns=data.get("max_turns"))
        delegate.driver.restore(data.get("state") or {})
        delegate.turns = int(data.get("turns", 0))
        ending = data.get("ending")
        if ending is not None:
            delegate.ending = StepOutcome(TaskStatus(ending["status"]), ending.get("summary", ""))
        return delegate

    def snapshot(self) -> JSON:
        ending = None if self.ending is None else {"status": self.ending.status.value,
                                                   "summary": self.ending.summary}
        return {"kind": self.kind, "config": self.config, "max_turns": self.max_turns,
                "turns": self.turns, "ending": ending, "state": self.driver.snapshot()}

    def decide(self, task: Task, ctx: RunContext) -> Decision | StepOutcome:
        """The sub-driver's next decision, or how the step ended."""
        if self.ending is not None:
            return self.ending
        if self.max_turns is not None and self.turns >= self.max_turns:
            return StepOutcome(TaskStatus.LIMIT, f"reached the step's max_turns "
                                                 f"({self.max_turns})")
        decision = self.driver.decide(task, ctx)
        if decision is None:
            return StepOutcome(TaskStatus.DONE, "")
        if decision.done:
            outcome = StepOutcome(decision.status, decision.summary)
            if not decision.actions:
                return outcome
            # the actions run first; the step ends at the next decide
            self.ending = outcome
            decision = replace(decision, done=False, status=TaskStatus.DONE, summary="")
        self.turns += 1
        return decision

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        self.driver.on_result(task, action, result)
