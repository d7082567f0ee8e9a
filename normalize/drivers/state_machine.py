"""The state-machine driver: `[[states]]` with transitions on the state's result.

Each non-terminal state runs its action (after `on_entry`, before `on_exit`);
the first transition whose condition holds picks the next state. Reaching a
terminal state ends the task; no transition matching fails it. A state whose
action names a step kind (`llm-decide`) or that names a nested `workflow`
runs it as a delegate (see `normalize.workflow.delegate`). The `llm`
condition asks the model to pick among the state's `llm` transitions; the
`visits:N` condition holds once the state has been entered N times. An
action cut off by a crash follows the state's `on_interrupt` (rerun | fail |
ask; see `normalize.drivers.interrupts`); `fail` counts it as a failed result.
"""

from __future__ import annotations

from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, RunContext
from normalize.drivers.frames import changed_vars, restored_vars
from normalize.drivers.interrupts import interrupt_policy, interrupt_question, rerun_answer
from normalize.drivers.step_actions import (
    RESULT_KEEP,
    action_for,
    apply_transform,
    delegate_config,
    fill,
    root_settings,
    step_kind_of,
)
from normalize.events import StepStarted
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.workflow.conditions import evaluate
from normalize.workflow.delegate import Delegate, StepOutcome
from normalize.workflow.spec import StateSpec, WorkflowSpec


class StateMachineDriver:
    """Follows a workflow's states."""

    name: ClassVar[str] = "state_machine"

    def __init__(self, spec: WorkflowSpec, variables: dict[str, Any] | None = None,
                 services: DriverServices | None = None, label: str | None = None) -> None:
        self.spec = spec
        self.services = services or DriverServices()
        self.label = label
        self.states = {s.name: s for s in spec.states}
        self.initial: dict[str, Any] = {**spec.vars, **(variables or {})}  # in the config
        self.vars: dict[str, Any] = dict(self.initial)
        self.state = spec.states[0].name
        self.phase = "entry"  # entry → action → exit → transition → (next state's entry)
        self.visits: dict[str, int] = {}
        self.last: dict[str, Any] | None = None
        self.failure: str | None = None
        self.delegate: Delegate | None = None
        self.interrupted: dict[str, Any] | None = None  # a result whose outcome is unknown
        self.asking = False  # the interrupt question is out
        self.again = ""  # the idempotency key the phase's next action sends (a rerun)

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> StateMachineDriver:
        return cls(WorkflowSpec.from_dict(config["spec"]), config.get("vars"), services,
                   config.get("label"))

    def snapshot(self) -> dict[str, Any]:
        return {"state": self.state, "phase": self.phase,
                "vars": changed_vars(self.vars, self.initial),
                "visits": self.visits, "last": self.last, "failure": self.failure,
                "interrupted": self.interrupted, "asking": self.asking,
                **({"again": self.again} if self.again else {}),  # (older snapshots as they were)
                "delegate": None if self.delegate is None else self.delegate.snapshot()}

    def restore(self, state: dict[str, Any]) -> None:
        self.state = state.get("state", self.state)
        self.phase = state.get("phase", self.phase)
        self.vars = restored_vars(state.get("vars", {}), self.initial)
        self.visits = dict(state.get("visits", {}))
        self.last = state.get("last")
        self.failure = state.get("failure")
        self.interrupted = state.get("interrupted")
        self.asking = bool(state.get("asking", False))
        self.again = str(state.get("again", ""))
        delegate = state.get("delegate")
        self.delegate = None if delegate is None else Delegate.restore(delegate, self.services)

    def _values(self, task: Task) -> dict[str, Any]:
        return {"task": task.goal, "workspace": task.workspace, "notes": "",
                "state": self.state, "visits": self.visits.get(self.state, 0), **self.vars}

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        decision = self._decide(task, ctx)
        again, self.again = self.again, ""
        if again and decision is not None and len(decision.actions) == 1:
            decision.actions[0].idempotency = again  # the phase cut short, run again
        return decision

    def _decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.failure is not None:
            return Decision.finish(self.failure, TaskStatus.FAILED)
        if self.interrupted is not None:
            state = self.states[self.state]
            policy = interrupt_policy(state.on_interrupt, self.spec.on_interrupt,
                                      interactive=ctx.interactive)
            if policy == "ask":
                self.asking = True
                command = self.interrupted.get("command") or state.action or state.name
                return Decision(actions=[interrupt_question(f"state {state.name!r}", command)])
            result = ActionResult.from_dict(self.interrupted["result"])
            self.again = self.interrupted.get("key", "") if policy == "rerun" else ""
            self.interrupted = None
            if policy == "fail":
                self._phase_done(state, result)  # rerun: the phase is simply decided again
        while True:
            state = self.states[self.state]
            values = self._values(task)
            if state.terminal:
                summary = f"reached terminal state {state.name!r}"
                if state.summary:
                    summary = fill(state.summary, values, f"state {state.name!r}")
                return Decision.finish(summary, TaskStatus(state.status))
            if self.phase == "entry":
                self.visits[state.name] = self.visits.get(state.name, 0) + 1
                label = f"{self.label} › {state.name}" if self.label else state.name
                ctx.emit(StepStarted(name=label, state=state.name,
                                     index=self.visits[state.name]))
                if state.on_entry:
                    return Decision(actions=[action_for(state.on_entry, self._values(task))])
                self.phase = "action"
            if self.phase == "action":
                decision = self._action(task, ctx, state)
                if decision is not None:
                    return decision
                self.phase = "exit"
            if self.phase == "exit":
                if state.on_exit:
                    return Decision(actions=[action_for(state.on_exit, values)])
                self.phase = "transition"
            if self.phase == "transition":
                from normalize.providers.base import TurnCancelledError

                try:
                    self._transition(state, task, ctx)
                except TurnCancelledError:  # stopped while the model picked: ask again on resume
                    return Decision(thinking=f"state {state.name!r}: interrupted while the "
                                             f"model picked the next state")
                if self.failure is not None:
                    return Decision.finish(self.failure, TaskStatus.FAILED)

    def _action(self, task: Task, ctx: RunContext, state: StateSpec) -> Decision | None:
        """The state's action, or its delegate's next decision; None once it is over."""
        values = self._values(task)
        kind = step_kind_of(state.action)
        if self.delegate is None and (state.workflow or kind):
            if state.workflow:
                included = self.spec.includes[state.workflow]
                config = {"spec": included, "label": state.name,
                          "vars": {k: values[k] for k in included.get("vars", {})
                                   if k in values}}
                self.delegate = Delegate.start("workflow", config, self.services,
                                               max_turns=state.max_turns)
            else:
                assert kind is not None and state.action is not None
                config = delegate_config(kind, state.action, values, name=state.name,
                                         prompt=state.prompt, max_turns=state.max_turns,
                                         llm=self.spec.llm, settings=root_settings(self.spec),
                                         notes="")
                self.delegate = Delegate.start(kind, config, self.services,
                                               max_turns=state.max_turns)
        if self.delegate is not None:
            out = self.delegate.decide(task, ctx)
            if isinstance(out, Decision):
                return out
            self.delegate = None
            self._keep(state, out.result(), out)
            return None
        if state.action:
            return Decision(actions=[action_for(state.action, values, timeout=state.timeout)])
        return None

    def _keep(self, state: StateSpec, result: ActionResult,
              outcome: StepOutcome | None = None) -> None:
        kept = result.to_dict()
        kept["output"] = kept["output"][:RESULT_KEEP]
        self.last = kept
        if state.capture and result.status is not ResultStatus.CANCELLED:
            # a failure's output is kept too: transitions branch on it, prompts quote it
            text = outcome.summary if outcome is not None else \
                (result.output or result.error or "")[:RESULT_KEEP]
            self.vars[state.capture] = apply_transform(None, text)

    def _transition(self, state: StateSpec, task: Task, ctx: RunContext) -> None:
        result = None if self.last is None else ActionResult.from_dict(self.last)
        values = self._values(task)
        for transition in state.transitions:
            if transition.condition == "llm":
                from normalize.drivers.choose import choose_next

                targets = [t.next for t in state.transitions if t.condition == "llm"]
                picked = choose_next(task, ctx, self.services, self.spec.llm, state.name,
                                     result, targets)
                if picked is None:
                    self.failure = (f"state {state.name!r}: the model did not pick a next "
                                    f"state among {', '.join(targets)}")
                    return
                self.state, self.phase = picked, "entry"
                return
            condition = fill(transition.condition, values, f"state {state.name!r}")
            if evaluate(condition, result, values):
                self.state = transition.next
                self.phase = "entry"
                return
        status = "no result" if result is None else result.status.value
        if result is not None and result.status is ResultStatus.INTERRUPTED and result.error:
            status += f": {result.error}"
        self.failure = f"state {state.name!r}: no transition matches ({status})"

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        if self.delegate is not None:
            self.delegate.on_result(task, action, result)
            return
        if self.asking:
            self.asking = False
            rerun = rerun_answer(result)  # None: no fitting answer, so it is asked again
            if rerun is not None and self.interrupted is not None:
                interrupted = ActionResult.from_dict(self.interrupted["result"])
                self.again = self.interrupted.get("key", "") if rerun else ""
                self.interrupted = None
                if not rerun:
                    self._phase_done(self.states[self.state], interrupted)
            return
        if result.status is ResultStatus.CANCELLED:
            return  # stopped by the user: this phase runs again on resume
        if result.status is ResultStatus.INTERRUPTED:
            kept = result.to_dict()
            kept["output"] = kept["output"][:RESULT_KEEP]
            self.interrupted = {"result": kept, "command": action.text,
                                "key": action.idempotency or action.key}
            return  # the next decide follows the state's on_interrupt
        self._phase_done(self.states[self.state], result)

    def _phase_done(self, state: StateSpec, result: ActionResult) -> None:
        """Move past the phase whose action ended with `result`."""
        if self.phase == "entry":
            self.phase = "action"
        elif self.phase == "action":
            self._keep(state, result)
            self.phase = "exit"
        elif self.phase == "exit":
            self.phase = "transition"
