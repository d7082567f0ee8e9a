"""Resuming a task: settle what the last process left, then hand the loop back.

The last process may have left a pending wait (a question, an approval) and a
decision still in flight (`task.inflight`). `Recovery.recover` answers the
wait from the person's `Reply`, feeds the in-flight decision's finished
results back to the driver, and turns a side effect that started but never
finished into an `interrupted` result ("outcome unknown") — unless its tool
re-attaches (`spawn`: run again, it finds the same child and collects it once;
its workspace step then counts from the last checkpoint, so what its first run
did before the stop is its own) — stopping any of its
processes that outlived their owner. Then it runs what never started (and
again what was read-only), as the run would have without the stop, with one
exception: when the stop left trouble the decider has not seen (an outcome
unknown, or a failure in an in-order decision) and the driver `redecides`
(the LLM driver), each of those actions gets a `cancelled` result instead and
the driver is asked for a new decision, so nothing more of the old one runs
before the model has seen what happened. A deterministic driver (a workflow)
follows its own rules (`on_interrupt`).

A graceful stop (one Ctrl-C, SIGTERM) that cuts a side effect short leaves it
exactly as a hard kill does, started and not finished (see the engine's
`_leave_unknown`): one rule for every interruption.

The engine holds a `Recovery` and calls `recover` as a resumed run begins.
Recovery runs what is left through the engine's own steps (`Steps`: execute,
finish, settle, checkpoint, approve), handed to it when it is made, and leaves
the run through `StopRun`, which the engine turns into `finalize`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from normalize.contract.driver import Driver, RunContext, redecides
from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    ActionStarted,
    InputReceived,
    Notice,
    ProcessStarted,
    WaitingForInput,
)
from normalize.intents import rejection
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Decision, ResultStatus, Task, TaskStatus, Wait
from normalize.tools import procs
from normalize.tools.base import ToolRegistry

OUTCOME_UNKNOWN = (
    "outcome unknown: the process stopped while this action ran, so it may or may not have "
    "taken effect (in full or in part); check its effect before running it again"
)


NOT_STARTED = ("not run: normalize stopped before this action started; "
               "run it again if it is still needed")
NOT_FINISHED = ("not finished: normalize stopped while this read-only action ran, so it "
                "changed nothing; run it again if it is still needed")


@dataclass
class Reply:
    """A person's reply to the task's pending wait (`resume --answer`)."""

    answer: str | None = None
    approve: bool | None = None


class StopRun(Exception):
    """Leaves the loop for `finalize` with a status."""

    def __init__(self, status: TaskStatus, summary: str = "", error: str | None = None) -> None:
        super().__init__(summary)
        self.status = status
        self.summary = summary
        self.error = error


def read_only(tools: ToolRegistry, action: Action) -> bool:
    """Whether `action` cannot change anything: a read-only tool, or one the parser rejected."""
    return rejection(action) is not None or tools.is_read_only(action)


def reattaches(tools: ToolRegistry, action: Action) -> bool:
    """Whether a cut-short side effect runs again on resume, finding its own work (`spawn`)."""
    return rejection(action) is None and tools.reattaches(action)


def action_finished(turn: int, action: Action, result: ActionResult) -> ActionFinished:
    """The `action_finished` event of `action`, which ended as `result`."""
    return ActionFinished(turn=turn, key=action.key, tool=action.tool, command=action.text,
                          status=result.status.value, duration=round(result.duration, 6),
                          exit_code=result.exit_code, error=result.error,
                          preview=result.shown[:4000], cache_id=result.cache_id,
                          data=result.data)


class Steps(Protocol):
    """The engine's steps that recovery runs a decision's rest through."""

    def execute(self, task: Task, driver: Driver, ctx: RunContext, actions: list[Action],
                parallel: bool, skip: frozenset[str] = frozenset(), fanout: int = 0) -> None:
        """Run `actions` (those in `skip` left out) as a decision's actions run."""
        ...

    def finish(self, task: Task, driver: Driver, ctx: RunContext, action: Action,
               result: ActionResult) -> None:
        """Record an action's end and hand it to the driver."""
        ...

    def settle(self, task: Task, driver: Driver, decision: Decision) -> None:
        """Close a decision: count the turn, checkpoint, end the run if it said done."""
        ...

    def checkpoint(self, task: Task, driver: Driver) -> None:
        """Save the task (with the driver's state) at a quiescent point."""
        ...

    def approve(self, keys: set[str]) -> None:
        """The actions (by key) a person already approved: they run without asking."""
        ...

    def rerun(self, keys: set[str]) -> None:
        """The side effects (by key) that run again after a stop (their step counts from the
        last checkpoint: what the first run did is theirs too)."""
        ...


class Recovery:
    """Settles what a stopped run left, through the engine's steps (see the module docstring)."""

    def __init__(self, store: TaskStore, tools: ToolRegistry, steps: Steps) -> None:
        self.store = store
        self.tools = tools
        self.steps = steps

    def recover(self, task: Task, driver: Driver, ctx: RunContext, reply: Reply | None) -> None:
        """Settle what the last process left: a pending wait, an in-flight decision."""
        if task.pending is not None:
            self._answer(task, driver, ctx, task.pending, reply)
        if task.inflight is None:
            return
        decision = Decision.from_dict(task.inflight["decision"])
        journaled = self._journaled(task)
        finished, started, _ = journaled
        redecide = redecides(driver) and unseen_trouble(self.tools, decision, finished, started)
        done_keys = self._replay(task, driver, ctx, decision, journaled, redecide)
        if redecide:
            self._report_unrun(task, driver, ctx, decision, done_keys, started)
            self.steps.settle(task, driver, decision)
            return
        self.steps.approve(set(task.inflight.get("approved", [])))
        self.steps.rerun({a.key for a in decision.actions if a.key in started
                          and a.key not in done_keys and reattaches(self.tools, a)})
        self.steps.execute(task, driver, ctx, decision.actions, decision.parallel,
                           skip=frozenset(done_keys), fanout=decision.max_concurrency)
        self.steps.settle(task, driver, decision)

    def _replay(self, task: Task, driver: Driver, ctx: RunContext, decision: Decision,
                journaled: tuple[dict[str, ActionFinished], set[str],
                                 dict[str, list[ProcessStarted]]],
                redecide: bool) -> set[str]:
        """The in-flight decision's actions as the journal left them: finished ones handed to
        the driver, a cut-short side effect settled as of unknown outcome, the rest said as
        interrupted; the keys of those settled."""
        finished, started, children = journaled
        done_keys: set[str] = set()
        whole = self.store.kept_results(task) if finished else {}
        for action in decision.actions:
            if action.key in finished:
                driver.on_result(task, action, recovered(finished[action.key],
                                                         whole.get(action.key)))
                done_keys.add(action.key)
            elif action.key in started and reattaches(self.tools, action):
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=False, rerun=True))
            elif action.key in started and not read_only(self.tools, action):
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=False, rerun=False))
                shown = action.text or action.tool
                stopped = self._stop_survivors(ctx, children.get(action.key, []))
                result = ActionResult(ResultStatus.INTERRUPTED,
                                      output=f"`{shown}`: {OUTCOME_UNKNOWN}{stopped}",
                                      error=OUTCOME_UNKNOWN + stopped,
                                      data={"outcome": "unknown"})
                self.steps.finish(task, driver, ctx, action, result)
                done_keys.add(action.key)
            elif action.key in started:
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=True, rerun=not redecide))
        return done_keys

    def _journaled(self, task: Task) -> tuple[dict[str, ActionFinished], set[str],
                                               dict[str, list[ProcessStarted]]]:
        """Since the last checkpoint: the finished actions, the started ones, their processes."""
        finished: dict[str, ActionFinished] = {}
        started: set[str] = set()
        children: dict[str, list[ProcessStarted]] = {}
        for event in self.store.typed_events_since(task):
            match event:
                case ActionFinished():
                    finished[event.key] = event
                case ActionStarted():
                    started.add(event.key)
                case ProcessStarted():
                    children.setdefault(event.key, []).append(event)
        return finished, started, children

    def _report_unrun(self, task: Task, driver: Driver, ctx: RunContext, decision: Decision,
                      done_keys: set[str], started: set[str]) -> None:
        """For a driver that decides again: what never ran (or never finished) is not run now.

        Each such action gets a `cancelled` result saying so; the driver reads
        them with the finished and the unknown ones, and its next decision is
        made knowing all of them.
        """
        for action in decision.actions:
            if action.key in done_keys:
                continue
            why = (NOT_FINISHED if action.key in started else NOT_STARTED)
            self.steps.finish(task, driver, ctx, action,
                              ActionResult(ResultStatus.CANCELLED, error=why))

    def _stop_survivors(self, ctx: RunContext, spawned: list[ProcessStarted]) -> str:
        """Stop the children of an interrupted action that outlived the last process.

        Only when that process is gone: a live owner (one whose lock was lost)
        still watches its own children.
        """
        stopped = []
        for event in spawned:
            pid, owner = event.pid, event.owner
            if owner and procs.same_process_alive(owner, event.owner_started):
                continue
            if procs.same_process_alive(pid, event.started):
                procs.stop_group(pid)
                stopped.append(str(pid))
                ctx.emit(Notice(level="warning", message=f"stopped process {pid}, left running "
                                                         f"by the interrupted `{event.key}`"))
        if not stopped:
            return ""
        return f"; its process {', '.join(stopped)} was still running and has been stopped"

    def _ask_child(self, task: Task, driver: Driver, ctx: RunContext, action: Action,
                   answer: str | None) -> None:
        """A sub-task waited: its `spawn` runs again, with the answer if one was given (the
        child goes on with it), or without (a child answered on its own is collected); and so
        do the other spawns of that decision whose children waited too."""
        task.pending = None
        if answer is not None:
            ctx.emit(InputReceived(kind="child", answer=answer))
        others = [_child_again(other, None) for other in self._waiting_with(task, action.key)]
        decision = Decision(actions=[_child_again(action, answer), *others])
        task.inflight = {"turn": task.turn, "decision": decision.to_dict()}
        self.steps.checkpoint(task, driver)
        self.steps.execute(task, driver, ctx, decision.actions, False)
        self.steps.settle(task, driver, decision)

    def _waiting_with(self, task: Task, key: str) -> list[Action]:
        """The other spawns of the last decision whose sub-tasks waited too (oldest first)."""
        events = [e for e in self.store.tail(task.id, 2000) if e.get("turn") == task.turn - 1
                  and e.get("tool") == "spawn" and e.get("key") != key]
        started = {e["key"]: e["action"] for e in events
                   if e.get("type") == "action_started" and isinstance(e.get("action"), dict)}
        waited = {e["key"]: bool((e.get("data") or {}).get("question")) for e in events
                  if e.get("type") == "action_finished"}  # (the last word on each key)
        return [Action.from_dict(started[k]) for k, asks in waited.items()
                if asks and k in started]

    def _answer(self, task: Task, driver: Driver, ctx: RunContext, wait: Wait,
                reply: Reply | None) -> None:
        """Turn the person's reply into the result of the action the task waited on.

        Without a fitting reply the task keeps waiting (and says so again). An
        approved side effect runs as a one-action decision of its own, with the
        same journal and checkpoint guarantees as any other.
        """
        action = wait.action or Action("ask", {"args": [wait.question]}, text="ask")
        answer = reply_text(wait, reply)
        if wait.kind == "child" and wait.action is not None:
            self._ask_child(task, driver, ctx, wait.action, answer)
            return
        if answer is None:
            ctx.emit(WaitingForInput(kind=wait.kind, question=wait.question,
                                     command=action.text or None))
            raise StopRun(TaskStatus.WAITING, wait.question)
        task.pending = None
        ctx.emit(InputReceived(kind=wait.kind, answer=answer))
        if wait.kind == "approval":
            if answer == "approved":
                approved = Action(action.tool, dict(action.params), action.text,
                                  key=f"{task.turn}.0")
                decision = Decision(actions=[approved])
                task.inflight = {"turn": task.turn, "decision": decision.to_dict(),
                                 "approved": [approved.key]}
                self.steps.approve({approved.key})
                self.steps.checkpoint(task, driver)
                self.steps.execute(task, driver, ctx, decision.actions, parallel=False)
                self.steps.settle(task, driver, decision)
                return
            result = ActionResult.blocked("denied by the user")
        else:
            result = ActionResult.success(f"The user answered: {answer}",
                                          data={"question": wait.question, "answer": answer})
        ctx.emit(action_finished(task.turn, action, result))
        driver.on_result(task, action, result)


def recovered(event: ActionFinished, whole: dict[str, Any] | None) -> ActionResult:
    """A finished action's result: whole when it was kept (`normalize.store.results`), else
    as its journal line holds it (the preview was the whole result then)."""
    if whole is not None:
        return ActionResult.from_dict(whole)
    return ActionResult(ResultStatus(event.status), output=event.preview,
                        exit_code=event.exit_code, error=event.error,
                        cache_id=event.cache_id, data=event.data)


def _child_again(action: Action, answer: str | None) -> Action:
    """The `spawn` a waiting child came from, to run again (same key: the same child),
    carrying the person's answer to it if there is one."""
    params = {k: v for k, v in action.params.items() if k != "answer"}
    if answer is not None:
        params["answer"] = answer
    return Action(action.tool, params, action.text, key=action.key)


def unseen_trouble(tools: ToolRegistry, decision: Decision,
                   finished: dict[str, ActionFinished], started: set[str]) -> bool:
    """Whether the stop left what the decider must see before more of its decision runs.

    That is a side effect whose outcome is unknown, or (in an in-order
    decision) an action that failed, which would have stopped the rest.
    When every action that started also finished well, the rest runs as it
    would have without the stop.
    """
    for action in decision.actions:
        if action.key in finished:
            failed = finished[action.key].status in ("error", "blocked")
            if failed and not decision.parallel:
                return True
        elif action.key in started and not read_only(tools, action) and \
                not reattaches(tools, action):
            return True
    return False


def reply_text(wait: Wait, reply: Reply | None) -> str | None:
    """The reply to `wait` as text, or None when it does not answer it.

    An approval takes an answer of yes/no (`resume --answer yes|no`); a question
    takes `--answer`; an interrupted action's question ("run it again?") takes
    either.
    """
    if reply is None:
        return None
    if wait.kind == "approval":
        verdict = reply.approve
        if verdict is None and reply.answer is not None:
            verdict = {"y": True, "yes": True, "n": False, "no": False}.get(
                reply.answer.strip().lower())
        return None if verdict is None else "approved" if verdict else "denied"
    if reply.answer is not None:
        return reply.answer
    if wait.kind == "interrupt" and reply.approve is not None:
        return "yes" if reply.approve else "no"
    return None
