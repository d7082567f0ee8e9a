"""The state-machine driver: `[[states]]` with transitions on the state's result.

Each non-terminal state runs its action (after `on_entry`, before `on_exit`);
the first transition whose condition holds picks the next state. Reaching a
terminal state ends the task; no transition matching fails it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from normalize.drivers.base import DriverServices, RunContext
from normalize.drivers.workflow import RESULT_KEEP, action_for, apply_transform
from normalize.events import StepStarted
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.workflow.conditions import evaluate
from normalize.workflow.interpolate import interpolate
from normalize.workflow.spec import StateSpec, WorkflowSpec


class StateMachineDriver:
    """Follows a workflow's states."""

    name: ClassVar[str] = "state_machine"

    def __init__(self, spec: WorkflowSpec, variables: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.states = {s.name: s for s in spec.states}
        self.vars: dict[str, Any] = {**spec.vars, **(variables or {})}
        self.state = spec.states[0].name
        self.phase = "entry"  # entry → action → exit → transition → (next state's entry)
        self.visits: dict[str, int] = {}
        self.last: dict[str, Any] | None = None
        self.failure: str | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> StateMachineDriver:
        del services
        return cls(WorkflowSpec.from_dict(config["spec"]), config.get("vars"))

    def snapshot(self) -> dict[str, Any]:
        return {"state": self.state, "phase": self.phase, "vars": self.vars,
                "visits": self.visits, "last": self.last, "failure": self.failure}

    def restore(self, state: dict[str, Any]) -> None:
        self.state = state.get("state", self.state)
        self.phase = state.get("phase", self.phase)
        self.vars = dict(state.get("vars", self.vars))
        self.visits = dict(state.get("visits", {}))
        self.last = state.get("last")
        self.failure = state.get("failure")

    def _values(self, task: Task) -> dict[str, Any]:
        return {"task": task.goal, "workspace": task.workspace, "state": self.state, **self.vars}

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.failure is not None:
            return Decision.finish(self.failure, TaskStatus.FAILED)
        while True:
            state = self.states[self.state]
            values = self._values(task)
            if state.terminal:
                summary = f"reached terminal state {state.name!r}"
                if state.summary:
                    summary = interpolate(state.summary, values)
                return Decision.finish(summary, TaskStatus(state.status))
            if self.phase == "entry":
                self.visits[state.name] = self.visits.get(state.name, 0) + 1
                ctx.emit(StepStarted(name=state.name, state=state.name,
                                     index=self.visits[state.name]))
                if state.on_entry:
                    return Decision(actions=[action_for(state.on_entry, values)])
                self.phase = "action"
            if self.phase == "action":
                if state.action:
                    return Decision(actions=[action_for(state.action, values, None)])
                self.phase = "exit"
            if self.phase == "exit":
                if state.on_exit:
                    return Decision(actions=[action_for(state.on_exit, values)])
                self.phase = "transition"
            if self.phase == "transition":
                self._transition(state, task)
                if self.failure is not None:
                    return Decision.finish(self.failure, TaskStatus.FAILED)

    def _transition(self, state: StateSpec, task: Task) -> None:
        result = None if self.last is None else ActionResult.from_dict(self.last)
        values = self._values(task)
        for transition in state.transitions:
            if evaluate(transition.condition, result, values):
                self.state = transition.next
                self.phase = "entry"
                return
        status = "no result" if result is None else result.status.value
        self.failure = f"state {state.name!r}: no transition matches ({status})"

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del action, task
        if result.status is ResultStatus.CANCELLED:
            return  # stopped by the user: this phase runs again on resume
        state = self.states[self.state]
        if self.phase == "entry":
            self.phase = "action"
        elif self.phase == "action":
            kept = result.to_dict()
            kept["output"] = kept["output"][:RESULT_KEEP]
            self.last = kept
            if state.capture and result.ok:
                self.vars[state.capture] = apply_transform(None, result.output)
            self.phase = "exit"
        elif self.phase == "exit":
            self.phase = "transition"
