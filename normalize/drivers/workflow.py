"""The workflow driver: runs `[[workflow.steps]]` in order, with nesting and fan-out.

Its state is a small stack of frames (`normalize.drivers.frames`: which step
list, which step, which loop item, which `until` iteration), so a task resumes mid-workflow,
mid-loop, at the exact step. Each frame is a scope with its own notes and
history; strategies (context, cache, retry) are inherited along the frames
(see `normalize.execution.scope`). A step's result may be captured into a
variable (optionally transformed); a failing step is retried under the retry
policy in effect (`on_error = "retry"` retries even when none is), then
follows its `on_error` (fail | skip | retry | continue). A step whose side
effect was cut off by a crash follows its `on_interrupt` (rerun | fail | ask;
see `normalize.drivers.interrupts`).

A step whose action names a step kind (`llm-decide`, …) or that names a
nested `workflow` file runs as a delegate: a sub-driver decides until it is
done, and its state nests in this driver's snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, RunContext, redecides
from normalize.drivers.frames import (
    ForEach,
    Frame,
    InFlight,
    Interrupted,
    Repeat,
    changed_vars,
    holders,
    restored_vars,
    steps_at,
)
from normalize.drivers.interrupts import interrupt_policy, interrupt_question, rerun_answer
from normalize.drivers.isolated import item_spawns, workflow_spawn
from normalize.drivers.step_actions import (
    RESULT_KEEP,
    action_for,
    apply_transform,
    delegate_config,
    fill,
    root_settings,
    step_kind_of,
)
from normalize.errors import UsageError
from normalize.events import Notice, StepStarted
from normalize.execution.scope import (
    ROOT_RETRY,
    Note,
    Resolved,
    ScopeSettings,
    ScopeState,
    record_history,
    render_notes,
    resolve,
)
from normalize.retry import RetryPolicy
from normalize.structured import mismatch
from normalize.tables import given
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus
from normalize.workflow.conditions import evaluate
from normalize.workflow.delegate import Delegate, StepOutcome
from normalize.workflow.sources import resolve_items
from normalize.workflow.spec import StepSpec, WorkflowSpec

DEFAULT_RETRY = {"strategy": "exponential", "max_attempts": 3, "base_delay": 0.5,
                 "max_delay": 8.0}
"""The policy `on_error = "retry"` uses when no retry policy is in effect."""


def settings_of(step: StepSpec) -> ScopeSettings:
    return ScopeSettings(step.context, {"strategy": step.cache} if step.cache else None,
                         None if step.retry is None else given(step.retry))


class WorkflowDriver:
    """Follows a workflow's steps."""

    name: ClassVar[str] = "workflow"

    def __init__(self, spec: WorkflowSpec, variables: dict[str, Any] | None = None,
                 services: DriverServices | None = None, label: str | None = None) -> None:
        self.spec = spec
        self.services = services or DriverServices()
        self.label = label
        self.initial: dict[str, Any] = {**spec.vars, **(variables or {})}  # in the config
        self.vars: dict[str, Any] = dict(self.initial)
        self.frames: list[Frame] = [Frame(scope=ScopeState(spec.name).to_dict())]
        self.last: dict[str, Any] | None = None
        self.attempt = 1
        self.retry_delay = 0.0
        self.failure: str | None = None
        self.pending: InFlight | None = None  # the step whose actions are out
        self.interrupted: Interrupted | None = None  # a step result whose outcome is unknown
        self.again = ""  # the idempotency key the step's next action sends (a retry, a rerun)
        self.delegate: Delegate | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> WorkflowDriver:
        return cls(WorkflowSpec.from_dict(config["spec"]), config.get("vars"), services,
                   config.get("label"))

    # -- state -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        pending, interrupted, delegate = self.pending, self.interrupted, self.delegate
        return {"vars": changed_vars(self.vars, self.initial),
                "frames": [f.to_dict() for f in self.frames],
                "last": self.last, "attempt": self.attempt, "retry_delay": self.retry_delay,
                "failure": self.failure,
                "pending": None if pending is None else pending.to_dict(),
                "interrupted": None if interrupted is None else interrupted.to_dict(),
                **({"again": self.again} if self.again else {}),  # (older snapshots as they were)
                "delegate": None if delegate is None else delegate.snapshot()}

    def restore(self, state: dict[str, Any]) -> None:
        self.vars = restored_vars(state.get("vars", {}), self.initial)
        if "frames" in state:
            self.frames = [Frame.from_dict(f) for f in state["frames"]]
        self.last = state.get("last")
        self.attempt = int(state.get("attempt", 1))
        self.retry_delay = float(state.get("retry_delay", 0.0))
        self.failure = state.get("failure")
        self.pending = InFlight.from_dict(pending) if (pending := state.get("pending")) else None
        self.interrupted = Interrupted.from_dict(cut) if (cut := state.get("interrupted")) \
            else None
        self.again = str(state.get("again", ""))
        delegate = state.get("delegate")
        self.delegate = None if delegate is None else Delegate.restore(delegate, self.services)

    @property
    def redecides_on_resume(self) -> bool:
        """Inside an `llm-decide` step, the model decides again after a troubled stop."""
        return self.delegate is not None and redecides(self.delegate.driver)

    # -- navigation ------------------------------------------------------

    def _holder(self, frame: Frame) -> StepSpec:
        """The step whose nested steps (or `else`, or loop) the frame runs."""
        return holders(self.spec.steps, frame.path)[-1]

    def _frame_steps(self, frame: Frame) -> Sequence[StepSpec]:
        if frame.holder:
            return [self._holder(frame)]
        return steps_at(self.spec.steps, frame.path)

    def _bindings(self, task: Task) -> dict[str, Any]:
        notes = [Note.from_dict(n) for f in self.frames for n in f.scope.get("notes", ())]
        values = {"task": task.goal, "workspace": task.workspace, "notes": render_notes(notes),
                  **self.vars}
        for frame in self.frames:
            if frame.loop is not None:
                values[frame.loop.as_] = frame.loop.item
        return values

    def resolved(self, step: StepSpec | None = None) -> Resolved:
        """The strategies in effect for `step` in the current frame (see the scope table)."""
        path = self.frames[-1].path if self.frames else ()
        chain = [settings_of(holder) for holder in holders(self.spec.steps, path)]
        if step is not None:
            chain.append(settings_of(step))
        return resolve(chain, root_settings(self.spec))

    def _last_result(self) -> ActionResult | None:
        return None if self.last is None else ActionResult.from_dict(self.last)

    def current_step(self) -> StepSpec | None:
        frame = self.frames[-1] if self.frames else None
        if frame is None:
            return None
        steps = self._frame_steps(frame)
        return steps[frame.pc] if frame.pc < len(steps) else None

    def _advance(self) -> None:
        self.frames[-1].pc += 1
        self.attempt = 1
        self.retry_delay = 0.0

    def _push(self, frame: Frame, name: str) -> None:
        frame.scope = ScopeState(name).to_dict()
        self.frames.append(frame)

    # -- deciding --------------------------------------------------------

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        while True:
            if self.failure is not None:
                return Decision.finish(self.failure, TaskStatus.FAILED)
            if self.interrupted is not None:
                asked = self._interrupted(ctx)
                if asked is not None:
                    return asked
                continue
            if self.delegate is not None:
                out = self.delegate.decide(task, ctx)
                if isinstance(out, Decision):
                    return out
                self._delegate_ended(task, out)
                continue
            if not self.frames:
                count = len(self.spec.steps)
                return Decision.finish("its one step finished" if count == 1
                                       else f"all {count} steps finished")
            decision = self._step(task, ctx)
            if decision is not None:
                return decision

    def _step(self, task: Task, ctx: RunContext) -> Decision | None:
        """Move to the next runnable step; its decision, or None to look again."""
        frame = self.frames[-1]
        steps = self._frame_steps(frame)
        if frame.pc >= len(steps):
            self._end_of_frame(task, ctx)
            return None
        step = steps[frame.pc]
        values = self._bindings(task)
        if not frame.holder:
            holds = True
            if step.condition:
                condition = fill(step.condition, values, f"step {step.name!r}")
                holds = evaluate(condition, self._last_result(), values)
                if not holds and not step.otherwise:
                    ctx.emit(Notice(message=f"skipped step {step.name!r}: {condition} is false"))
                    self._advance()
                    return None
            if len(self.frames) == 1:
                label = f"{self.label} › {step.name}" if self.label else step.name
                ctx.emit(StepStarted(name=label, index=frame.pc + 1,
                                     total=len(self.spec.steps)))
            if not holds:
                ctx.emit(Notice(message=f"step {step.name!r}: {step.condition} is false; "
                                        f"running its `else`"))
                self._push(Frame(frame.here("else")), f"{step.name} (else)")
                return None
            if step.for_each:
                source = fill(step.for_each, values, f"step {step.name!r}")
                items = resolve_items(source, ctx.workspace, values)
                if not items:
                    ctx.emit(Notice(message=f"step {step.name!r}: for_each found no items"))
                    self._advance()
                    return None
                isolated = step.isolation == "isolated"  # each item a sub-task in a copy
                if isolated and step.parallel:
                    return self._fanout(step, items, item_spawns(self.spec, step, items, values),
                                        step.max_concurrency)
                if step.parallel and step.action:
                    return self._fanout(step, items, [
                        action_for(step.action, {**values, step.as_: item}, step)
                        for item in items], step.max_concurrency)
                self._push(Frame(frame.here(), holder=not step.steps or isolated,
                                 loop=ForEach(items, 0, step.as_)), step.name)
                return None
            if step.until:
                self._push(Frame(frame.here(), holder=not step.steps,
                                 repeat=Repeat(1, step.max_iterations or 10)), step.name)
                return None
            if step.steps:
                self._push(Frame(frame.here()), step.name)
                return None
        return self._leaf(ctx, step, values)

    def _leaf(self, ctx: RunContext, step: StepSpec,
              values: dict[str, Any]) -> Decision | None:
        """The decision for a step that runs something: an action or a delegate."""
        if self.retry_delay > 0:
            policy = self._retry_policy(step)
            ctx.emit(Notice(level="warning", message=f"retrying step {step.name!r} (attempt "
                                                     f"{self.attempt} of {policy.attempts}) in "
                                                     f"{self.retry_delay:g} s"))
            if ctx.cancel.wait(self.retry_delay):
                return Decision(thinking=f"retry of step {step.name!r} interrupted")
            self.retry_delay = 0.0
        again, self.again = self.again, ""
        kind = step_kind_of(step.action)
        if step.for_each and step.isolation == "isolated":  # one item, after the one before
            self.pending = InFlight("step")
            item = values[step.as_]
            return Decision(actions=item_spawns(self.spec, step, [item], values))
        if step.workflow is not None and step.isolation == "isolated":
            self.pending = InFlight("step")  # the nested workflow as a sub-task
            return Decision(actions=[workflow_spawn(step, self._included(step), values)])
        if step.workflow is not None:
            self._start_workflow(step, values)
            return None
        if kind is not None:
            assert step.action is not None
            settings = self.resolved(step)
            config = delegate_config(kind, step.action, values, name=step.name,
                                     prompt=step.prompt, max_turns=step.max_turns,
                                     llm=self.spec.llm, settings=settings,
                                     notes=str(values.get("notes", "")))
            self.delegate = Delegate.start(kind, config, self.services, max_turns=step.max_turns)
            return None
        if step.action is None:
            raise UsageError(f"step {step.name!r} has nothing to run")
        action = action_for(step.action, values, step)
        if action.tool == "done":
            return Decision.finish(" ".join(action.args) or "done")
        action.idempotency = again
        self._scope_cache(action, step)
        self.pending = InFlight("step")
        return Decision(actions=[action])

    def _scope_cache(self, action: Action, step: StepSpec) -> None:
        """Send the result to the scope's cache when the scope chose its own."""
        cache = self.resolved(step).cache
        if cache != root_settings(self.spec).cache:
            action.params["cache"] = dict(cache)

    def _included(self, step: StepSpec) -> dict[str, Any]:
        """The nested workflow a `workflow` step names, as loaded with this one."""
        assert step.workflow is not None
        included = self.spec.includes.get(step.workflow)
        if included is None:
            raise UsageError(f"step {step.name!r}: nested workflow {step.workflow!r} was not "
                             f"loaded with this workflow")
        return dict(included)

    def _start_workflow(self, step: StepSpec, values: dict[str, Any]) -> None:
        included = self._included(step)
        sub_vars = {k: values[k] for k in included.get("vars", {}) if k in values}
        config = {"spec": included, "vars": sub_vars, "label": step.name}
        self.delegate = Delegate.start("workflow", config, self.services,
                                       max_turns=step.max_turns)

    def _end_of_frame(self, task: Task, ctx: RunContext) -> None:
        """A frame's steps are done: next loop item, next iteration, or back to the parent."""
        frame = self.frames[-1]
        loop, repeat = frame.loop, frame.repeat
        if loop is not None and loop.i + 1 < len(loop.items):
            loop.i += 1
            frame.pc = 0
            return
        if repeat is not None:
            holder = self._holder(frame)
            values = self._bindings(task)
            until = fill(holder.until or "always", values, f"step {holder.name!r}")
            if not evaluate(until, self._last_result(), values):
                if repeat.i < repeat.max:
                    repeat.i += 1
                    frame.pc = 0
                    ctx.emit(Notice(message=f"step {holder.name!r}: {until} is false; "
                                            f"iteration {repeat.i} of {repeat.max}"))
                    return
                self.frames.pop()
                why = f"`until = {until!r}` still false after {repeat.max} iterations"
                self._settle(holder, ActionResult.failure(why), 1)
                return
        self.frames.pop()
        if self.frames:
            self._advance()

    def _fanout(self, step: StepSpec, items: list[Any], actions: list[Action],
                most: int) -> Decision:
        """One action per item, `most` at a time; their results settle the step together."""
        for action in actions:
            self._scope_cache(action, step)
        self.pending = InFlight("fanout", count=len(actions),
                               items=items if step.transform else None)
        return Decision(actions=actions, parallel=True, max_concurrency=max(1, most))

    def _interrupted(self, ctx: RunContext) -> Decision | None:
        """Follow `on_interrupt` for a step whose side effect has an unknown outcome."""
        assert self.interrupted is not None
        step = self.current_step()
        if step is None:
            self.interrupted = None
            return None
        policy = interrupt_policy(step.on_interrupt, self.spec.on_interrupt,
                                  interactive=ctx.interactive)
        if policy == "ask":
            self.pending = InFlight("interrupt")
            command = self.interrupted.command or step.action or step.name
            return Decision(actions=[interrupt_question(f"step {step.name!r}", command)])
        result = ActionResult.from_dict(self.interrupted.result)
        key, self.interrupted = self.interrupted.key, None
        if policy == "rerun":
            self.again = key
            ctx.emit(Notice(message=f"step {step.name!r}: running it again "
                                    "(on_interrupt = rerun)"))
        else:
            self._settle(step, result, 1)
        return None

    # -- results ---------------------------------------------------------

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        if self.delegate is not None:
            self.delegate.on_result(task, action, result)
            return
        step = self.current_step()
        if step is None:
            return
        kept = result.to_dict()
        kept["output"] = kept["output"][:RESULT_KEEP]
        if self.pending is not None and self.pending.kind == "fanout":
            self._fanout_result(task, step, kept)
            return
        if self.pending is not None and self.pending.kind == "interrupt":
            self._interrupt_answer(step, result)
            return
        self.pending = None
        self.last = kept
        if result.status is ResultStatus.CANCELLED:
            return  # stopped by the user: the step runs again on resume
        if result.status is ResultStatus.INTERRUPTED:
            self.interrupted = Interrupted(kept, action.text, action.idempotency or action.key)
            return  # the next decide follows the step's on_interrupt
        if result.ok and step.capture:
            result = self._capture(step, apply_transform(step.transform, result.output,
                                                         self._bindings(task)), result)
        self._remember(step, action.text or action.tool, result)
        note = result.data.get("note") if result.ok else None
        if note:
            scope = self.frames[-1].scope
            added = Note(str(note), result.data.get("turns"), result.data.get("until"))
            self.frames[-1].scope = {**scope, "notes": [*scope.get("notes", ()),
                                                        added.to_dict()]}
        attempt = self.attempt
        self._settle(step, result, 0 if result.ok else 1)
        if self.attempt > attempt:  # it is retried: the retry sends the same key
            self.again = action.idempotency or action.key

    def _capture(self, step: StepSpec, value: Any, result: ActionResult) -> ActionResult:
        """Keep `value` as the step's capture; one its `schema` refuses fails the step instead."""
        problem = None if step.schema is None else mismatch(step.schema, value)
        if problem is None:
            self.vars[str(step.capture)] = value
            return result
        failed = ActionResult(ResultStatus.ERROR, output=result.output, error=(
            f"{{{step.capture}}} does not match its schema: {problem}"))
        self.last = failed.to_dict()
        return failed

    def _fanout_result(self, task: Task, step: StepSpec, kept: dict[str, Any]) -> None:
        """One result of a fan-out; the last one merges them all and settles the step."""
        assert self.pending is not None
        self.pending.results.append(kept)
        if len(self.pending.results) < self.pending.count:
            return
        results = [ActionResult.from_dict(r) for r in self.pending.results]
        failed = [r for r in results if not r.ok]
        merged = ActionResult(
            ResultStatus.ERROR if failed else ResultStatus.SUCCESS,
            output="\n".join(r.output for r in results),
            error=failed[0].error if failed else None,
        )
        self.last = merged.to_dict()
        if step.capture:
            values = self._bindings(task)
            items = self.pending.items or [None] * len(results)
            self.vars[step.capture] = [
                apply_transform(step.transform, r.output, {**values, step.as_: item})
                for r, item in zip(results, items, strict=True)]
        self.pending = None
        self._remember(step, f"{step.name} ×{len(results)}", merged)
        self._settle(step, merged, len(failed))

    def _interrupt_answer(self, step: StepSpec, result: ActionResult) -> None:
        """The answer to "run the interrupted step again?"."""
        self.pending = None
        rerun = rerun_answer(result)  # None: no fitting answer, so it is asked again
        if rerun is not None and self.interrupted is not None:
            interrupted = ActionResult.from_dict(self.interrupted.result)
            self.again = self.interrupted.key if rerun else ""
            self.interrupted = None
            if not rerun:
                self._settle(step, interrupted, 1)

    def _failure_capture(self, step: StepSpec, result: ActionResult) -> Any:
        """What a failed `on_error = "continue"` step captures: its transformed output, or
        its error when the transform finds nothing in it."""
        try:
            value = apply_transform(step.transform, result.output, self.vars)
        except (ValueError, KeyError, IndexError, TypeError):
            value = None
        return value or result.error or result.status.value

    def _delegate_ended(self, task: Task, outcome: StepOutcome) -> None:
        assert self.delegate is not None
        kind = self.delegate.kind
        self.delegate = None
        step = self.current_step()
        if step is None:
            return
        result = outcome.result()
        self.last = result.to_dict()
        if step.capture and result.ok:
            result = self._capture(step, apply_transform(step.transform, outcome.summary,
                                                         self._bindings(task)), result)
        elif step.capture and step.on_error == "continue":
            self.vars[step.capture] = apply_transform(step.transform, outcome.summary,
                                                      self._bindings(task))
        self._remember(step, f"{kind} {step.name}", result)
        self._settle(step, result, 0 if result.ok else 1)

    def _remember(self, step: StepSpec, command: str, result: ActionResult) -> None:
        """Add the result to the innermost scope's history and age every note."""
        text = result.output + (result.error or "")
        last = len(self.frames) - 1
        for index, frame in enumerate(self.frames):
            data = frame.scope
            if data.get("notes"):  # only scopes with notes have anything to age
                notes = [Note.from_dict(n) for n in data["notes"]]
                data = {**data, "notes": [n.to_dict() for n in notes if n.after(text)]}
            if index == last:  # the history grows in place: no rebuild of the others
                data = record_history(data, command, result.status.value, text, step.name)
            frame.scope = data

    def _retry_policy(self, step: StepSpec) -> RetryPolicy:
        table = self.resolved(step if not self.frames[-1].holder else None).retry
        if table.get("strategy", ROOT_RETRY) == "none" and step.on_error == "retry":
            table = DEFAULT_RETRY
        return Resolved(retry=table).retry_policy

    def _end_iteration(self) -> bool:
        """Inside an `until` loop, a failed step ends the iteration; `until` then decides."""
        for depth in range(len(self.frames) - 1, -1, -1):
            frame = self.frames[depth]
            if frame.repeat is not None:
                del self.frames[depth + 1:]
                frame.pc = len(self._frame_steps(frame))
                self.attempt = 1
                self.retry_delay = 0.0
                return True
            if frame.loop is not None:
                return False  # a for_each between: its item failed, and that fails the loop
        return False

    def _settle(self, step: StepSpec, result: ActionResult, failures: int) -> None:
        if failures == 0:
            self._advance()
            return
        policy = self._retry_policy(step)
        if self.attempt < policy.attempts and result.status is not ResultStatus.INTERRUPTED:
            self.retry_delay = policy.delay(self.attempt)
            self.attempt += 1
            return
        if step.on_error in ("skip", "continue"):
            if step.on_error == "continue" and step.capture and step.capture not in self.vars:
                self.vars[step.capture] = self._failure_capture(step, result)
            self._advance()
            return
        if self._end_iteration():
            return
        why = result.error or result.status.value
        self.failure = f"step {step.name!r} failed: {why}"
