"""Resuming a task: settle what the last process left, then hand the loop back.

The last process may have left a pending wait (a question, an approval) and a
decision still in flight (`task.inflight`). `Recovery._recover` answers the
wait from the person's `Reply`, feeds the in-flight decision's finished
results back to the driver, and turns a side effect that started but never
finished into an `interrupted` result ("outcome unknown") — unless its tool
re-attaches (`spawn`: run again, it finds the same child and collects it once) — stopping any of its
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

`Recovery` is a part of `Engine` (a mixin): it uses the engine's steps
(`_execute`, `_finish`, `_settle`, `_checkpoint`) and leaves the run through
`StopRun`, which the engine turns into `finalize`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normalize.contract.driver import Driver, RunContext
from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    InputReceived,
    Notice,
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


def redecides(driver: Driver) -> bool:
    """Whether `driver` decides again after a troubled stop rather than run its decision's rest.

    A driver says so with a true `redecides_on_resume` attribute (the LLM driver
    does: a model must see what happened before anything else runs). Others,
    like the workflow driver, are deterministic: resume runs what never ran.
    """
    return bool(getattr(driver, "redecides_on_resume", False))


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


class Recovery:
    """The resume half of the engine (see the module docstring)."""

    store: TaskStore
    tools: ToolRegistry
    _approved: set[str]

    # the engine's steps, which recovery reuses
    def _execute(self, task: Task, driver: Driver, ctx: RunContext, actions: list[Action],
                 parallel: bool, skip: frozenset[str] = frozenset(), fanout: int = 0) -> None:
        raise NotImplementedError  # abstract: the Engine defines it

    def _finish(self, task: Task, driver: Driver, ctx: RunContext, action: Action,
                result: ActionResult) -> None:
        raise NotImplementedError  # abstract: the Engine defines it

    def _settle(self, task: Task, driver: Driver, decision: Decision) -> None:
        raise NotImplementedError  # abstract: the Engine defines it

    def _checkpoint(self, task: Task, driver: Driver) -> None:
        raise NotImplementedError  # abstract: the Engine defines it

    def _read_only(self, action: Action) -> bool:
        """Whether `action` cannot change anything: a read-only tool, or one the parser rejected."""
        return rejection(action) is not None or self.tools.is_read_only(action)

    def _reattaches(self, action: Action) -> bool:
        """Whether a cut-short side effect runs again on resume, finding its own work (`spawn`)."""
        return rejection(action) is None and self.tools.reattaches(action)

    def _recover(self, task: Task, driver: Driver, ctx: RunContext, reply: Reply | None) -> None:
        """Settle what the last process left: a pending wait, an in-flight decision."""
        if task.pending is not None:
            self._answer(task, driver, ctx, task.pending, reply)
        if task.inflight is None:
            return
        decision = Decision.from_dict(task.inflight["decision"])
        finished: dict[str, dict[str, Any]] = {}
        started: set[str] = set()
        children: dict[str, list[dict[str, Any]]] = {}
        for event in self.store.events_since(task):
            if event.get("type") == "action_finished":
                finished[event["key"]] = event
            elif event.get("type") == "action_started":
                started.add(event["key"])
            elif event.get("type") == "process_started":
                children.setdefault(event["key"], []).append(event)
        redecide = redecides(driver) and self._unseen_trouble(decision, finished, started)
        done_keys: set[str] = set()
        for action in decision.actions:
            if action.key in finished:
                event = finished[action.key]
                result = ActionResult(ResultStatus(event["status"]), output=event["preview"],
                                      exit_code=event.get("exit_code"), error=event.get("error"),
                                      cache_id=event.get("cache_id"), data=event.get("data", {}))
                driver.on_result(task, action, result)
                done_keys.add(action.key)
            elif action.key in started and self._reattaches(action):
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=False, rerun=True))
            elif action.key in started and not self._read_only(action):
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=False, rerun=False))
                shown = action.text or action.tool
                stopped = self._stop_survivors(ctx, children.get(action.key, []))
                result = ActionResult(ResultStatus.INTERRUPTED,
                                      output=f"`{shown}`: {OUTCOME_UNKNOWN}{stopped}",
                                      error=OUTCOME_UNKNOWN + stopped,
                                      data={"outcome": "unknown"})
                self._finish(task, driver, ctx, action, result)
                done_keys.add(action.key)
            elif action.key in started:
                ctx.emit(ActionInterrupted(key=action.key, tool=action.tool, command=action.text,
                                           read_only=True, rerun=not redecide))
        if redecide:
            self._report_unrun(task, driver, ctx, decision, done_keys, started)
            self._settle(task, driver, decision)
            return
        self._approved = set(task.inflight.get("approved", []))
        self._execute(task, driver, ctx, decision.actions, decision.parallel,
                      skip=frozenset(done_keys), fanout=decision.max_concurrency)
        self._settle(task, driver, decision)

    def _unseen_trouble(self, decision: Decision, finished: dict[str, dict[str, Any]],
                        started: set[str]) -> bool:
        """Whether the stop left what the decider must see before more of its decision runs.

        That is a side effect whose outcome is unknown, or (in an in-order
        decision) an action that failed, which would have stopped the rest.
        When every action that started also finished well, the rest runs as it
        would have without the stop.
        """
        for action in decision.actions:
            if action.key in finished:
                failed = finished[action.key].get("status") in ("error", "blocked")
                if failed and not decision.parallel:
                    return True
            elif action.key in started and not self._read_only(action) and \
                    not self._reattaches(action):
                return True
        return False

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
            self._finish(task, driver, ctx, action, ActionResult(ResultStatus.CANCELLED, error=why))

    def _stop_survivors(self, ctx: RunContext, spawned: list[dict[str, Any]]) -> str:
        """Stop the children of an interrupted action that outlived the last process.

        Only when that process is gone: a live owner (one whose lock was lost)
        still watches its own children.
        """
        stopped = []
        for event in spawned:
            pid = int(event["pid"])
            owner = int(event.get("owner") or 0)
            if owner and procs.same_process_alive(owner, event.get("owner_started")):
                continue
            if procs.same_process_alive(pid, event.get("started")):
                procs.stop_group(pid)
                stopped.append(str(pid))
                ctx.emit(Notice(level="warning", message=f"stopped process {pid}, left running "
                                                         f"by the interrupted `{event['key']}`"))
        if not stopped:
            return ""
        return f"; its process {', '.join(stopped)} was still running and has been stopped"

    def _answer(self, task: Task, driver: Driver, ctx: RunContext, wait: Wait,
                reply: Reply | None) -> None:
        """Turn the person's reply into the result of the action the task waited on.

        Without a fitting reply the task keeps waiting (and says so again). An
        approved side effect runs as a one-action decision of its own, with the
        same journal and checkpoint guarantees as any other.
        """
        action = wait.action or Action("ask", {"args": [wait.question]}, text="ask")
        answer = reply_text(wait, reply)
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
                self._approved = {approved.key}
                self._checkpoint(task, driver)
                self._execute(task, driver, ctx, decision.actions, parallel=False)
                self._settle(task, driver, decision)
                return
            result = ActionResult.blocked("denied by the user")
        else:
            result = ActionResult.success(f"The user answered: {answer}",
                                          data={"question": wait.question, "answer": answer})
        ctx.emit(ActionFinished(turn=task.turn, key=action.key, tool=action.tool,
                                command=action.text, status=result.status.value,
                                duration=round(result.duration, 6), exit_code=result.exit_code,
                                error=result.error, preview=result.shown[:4000],
                                cache_id=result.cache_id, data=result.data))
        driver.on_result(task, action, result)


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
