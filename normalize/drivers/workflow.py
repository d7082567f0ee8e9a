"""The workflow driver: runs `[[workflow.steps]]` in order, with nesting and fan-out.

Its state is a small stack of frames (which step list, which step, which
loop item), so a task resumes mid-workflow, mid-loop, at the exact step.
A step's result may be captured into a variable (optionally transformed);
a failing step follows its `on_error` (fail | skip | retry | continue).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from normalize.drivers.base import DriverServices, RunContext
from normalize.errors import ConfigError, UsageError
from normalize.events import Notice, StepStarted
from normalize.intents import parse_command
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.workflow.conditions import evaluate
from normalize.workflow.interpolate import interpolate
from normalize.workflow.sources import resolve_items
from normalize.workflow.spec import StepSpec, WorkflowSpec

RESULT_KEEP = 20_000  # characters of the last result kept for conditions


def apply_transform(transform: str | None, text: str) -> Any:
    """`json:a.b` (a field), `regex:PATTERN` (group 1, or the match), `lines`, `strip`."""
    if not transform:
        return text
    kind, _, arg = transform.partition(":")
    if kind == "json":
        value: Any = json.loads(text)
        for part in filter(None, arg.split(".")):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value
    if kind == "regex":
        match = re.search(arg, text, re.MULTILINE)
        if match is None:
            return ""
        return match.group(1) if match.groups() else match.group(0)
    if kind == "lines":
        return [ln for ln in text.splitlines() if ln.strip()]
    if kind == "strip":
        return text.strip()
    raise ConfigError(f"unknown transform {transform!r} (json:FIELD, regex:PATTERN, lines, strip)")


def action_for(text: str, variables: dict[str, Any], step: StepSpec | None = None) -> Action:
    """Parse a step's interpolated command into an Action."""
    command = interpolate(text, variables)
    action = parse_command(command)
    if step is not None and step.timeout is not None:
        action.params["timeout"] = step.timeout
    return action


class WorkflowDriver:
    """Follows a workflow's steps."""

    name: ClassVar[str] = "workflow"

    def __init__(self, spec: WorkflowSpec, variables: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.vars: dict[str, Any] = dict(spec.vars)
        self.vars.update(variables or {})
        self.frames: list[dict[str, Any]] = [{"path": [], "pc": 0}]
        self.last: dict[str, Any] | None = None
        self.attempt = 1
        self.failure: str | None = None
        self.pending: dict[str, Any] | None = None  # the step whose actions are out

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> WorkflowDriver:
        del services
        return cls(WorkflowSpec.from_dict(config["spec"]), config.get("vars"))

    # -- state -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"vars": self.vars, "frames": self.frames, "last": self.last,
                "attempt": self.attempt, "failure": self.failure, "pending": self.pending}

    def restore(self, state: dict[str, Any]) -> None:
        self.vars = dict(state.get("vars", self.vars))
        self.frames = list(state.get("frames", self.frames))
        self.last = state.get("last")
        self.attempt = int(state.get("attempt", 1))
        self.failure = state.get("failure")
        self.pending = state.get("pending")

    # -- navigation ------------------------------------------------------

    def _steps(self, path: list[int]) -> list[StepSpec]:
        steps = self.spec.steps
        for index in path:
            steps = steps[index].steps
        return steps

    def _frame_steps(self, frame: dict[str, Any]) -> list[StepSpec]:
        if frame.get("self"):
            parent = self._steps(frame["path"][:-1])[frame["path"][-1]]
            return [parent]
        return self._steps(frame["path"])

    def _bindings(self, task: Task) -> dict[str, Any]:
        values = {"task": task.goal, "workspace": task.workspace, **self.vars}
        for frame in self.frames:
            loop = frame.get("loop")
            if loop:
                values[loop["as"]] = loop["items"][loop["i"]]
        return values

    def _last_result(self) -> ActionResult | None:
        return None if self.last is None else ActionResult.from_dict(self.last)

    def current_step(self) -> StepSpec | None:
        frame = self.frames[-1] if self.frames else None
        if frame is None:
            return None
        steps = self._frame_steps(frame)
        return steps[frame["pc"]] if frame["pc"] < len(steps) else None

    def _advance(self) -> None:
        self.frames[-1]["pc"] += 1
        self.attempt = 1

    # -- deciding --------------------------------------------------------

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        if self.failure is not None:
            return Decision.finish(self.failure, TaskStatus.FAILED)
        while self.frames:
            frame = self.frames[-1]
            steps = self._frame_steps(frame)
            if frame["pc"] >= len(steps):
                loop = frame.get("loop")
                if loop and loop["i"] + 1 < len(loop["items"]):
                    loop["i"] += 1
                    frame["pc"] = 0
                    continue
                self.frames.pop()
                if self.frames:
                    self._advance()
                continue
            step = steps[frame["pc"]]
            values = self._bindings(task)
            if step.condition and not frame.get("self"):
                condition = interpolate(step.condition, values)
                if not evaluate(condition, self._last_result(), values):
                    ctx.emit(Notice(message=f"skipped step {step.name!r}: {condition} is false"))
                    self._advance()
                    continue
            if len(self.frames) == 1:
                ctx.emit(StepStarted(name=step.name, index=frame["pc"] + 1,
                                     total=len(self.spec.steps)))
            if step.for_each and not frame.get("self"):
                items = resolve_items(interpolate(step.for_each, values), ctx.workspace, values)
                if not items:
                    ctx.emit(Notice(message=f"step {step.name!r}: for_each found no items"))
                    self._advance()
                    continue
                if step.parallel and step.action and not step.steps:
                    return self._fanout(step, items, values)
                self.frames.append({"path": [*frame["path"], frame["pc"]], "pc": 0,
                                    "self": not step.steps,
                                    "loop": {"items": items, "i": 0, "as": step.as_}})
                continue
            if step.steps and not frame.get("self"):
                self.frames.append({"path": [*frame["path"], frame["pc"]], "pc": 0})
                continue
            if step.action is None:
                raise UsageError(f"step {step.name!r} has nothing to run")
            action = action_for(step.action, values, step)
            if action.tool == "done":
                return Decision.finish(" ".join(action.args) or "done")
            self.pending = {"kind": "step", "results": []}
            return Decision(actions=[action])
        return Decision.finish(f"all {len(self.spec.steps)} steps finished")

    def _fanout(self, step: StepSpec, items: list[Any], values: dict[str, Any]) -> Decision:
        actions = [action_for(step.action or "", {**values, step.as_: item}, step)
                   for item in items]
        self.pending = {"kind": "fanout", "results": [], "count": len(actions)}
        return Decision(actions=actions, parallel=True,
                        max_concurrency=max(1, step.max_concurrency))

    # -- results ---------------------------------------------------------

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del action
        step = self.current_step()
        if step is None:
            return
        kept = result.to_dict()
        kept["output"] = kept["output"][:RESULT_KEEP]
        if self.pending and self.pending["kind"] == "fanout":
            self.pending["results"].append(kept)
            if len(self.pending["results"]) < self.pending["count"]:
                return
            results = [ActionResult.from_dict(r) for r in self.pending["results"]]
            self.pending = None
            failed = [r for r in results if not r.ok]
            merged = ActionResult(
                ResultStatus.ERROR if failed else ResultStatus.SUCCESS,
                output="\n".join(r.output for r in results),
                error=failed[0].error if failed else None,
            )
            self.last = merged.to_dict()
            if step.capture:
                self.vars[step.capture] = [apply_transform(step.transform, r.output)
                                           for r in results]
            self._settle(task, step, merged, len(failed))
            return
        self.pending = None
        self.last = kept
        if result.status is ResultStatus.CANCELLED:
            return  # stopped by the user: the step runs again on resume
        if result.ok and step.capture:
            self.vars[step.capture] = apply_transform(step.transform, result.output)
        self._settle(task, step, result, 0 if result.ok else 1)

    def _settle(self, task: Task, step: StepSpec, result: ActionResult, failures: int) -> None:
        del task
        if failures == 0:
            self._advance()
            return
        if result.status is ResultStatus.INTERRUPTED and step.on_interrupt == "rerun":
            return
        retry = step.retry or (self.spec.retry if step.on_error == "retry" else None)
        attempts = int((retry or {}).get("max_attempts", 3 if step.on_error == "retry" else 1))
        if retry is not None and self.attempt < attempts and \
                result.status is not ResultStatus.INTERRUPTED:
            self.attempt += 1
            return
        if step.on_error in ("skip", "continue"):
            if step.on_error == "continue" and step.capture and step.capture not in self.vars:
                self.vars[step.capture] = result.output
            self._advance()
            return
        why = result.error or result.status.value
        self.failure = f"step {step.name!r} failed: {why}"

