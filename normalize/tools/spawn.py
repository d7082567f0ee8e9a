"""`spawn [--model M] [--budget USD] [--max-turns N] [--isolated] [--merge M] [--keep] GOAL`.

Starts a sub-task (a task with this one as its parent) and answers with its
outcome when it ends: its summary, status, cost and diff stat. Several spawns
in one decision run together (`concurrent`). Running one again after a crash
finds the same child (`reattaches`): see `normalize.subtasks.spawner`.

A child whose changes could not be written (a full disk; nothing of them
was) makes this task wait too: its resume runs the spawn again, which applies
them. A child that waits for a person makes this task wait with its question
(kind `child`); `resume PARENT --answer TEXT` runs the spawn again with the
answer, which reaches the child (`resume CHILD --answer TEXT`); after the
child was answered on its own, `resume PARENT` collects it.

`--attempts N [--pick COMMAND] [--model A,B,C]` is best-of-N: N isolated
children try the goal side by side (the models taken in turn), COMMAND runs in
each finished one's copy, and the best (`children.PICK_RULE`) is applied.
"""

from __future__ import annotations

from typing import ClassVar

from normalize.errors import ToolError
from normalize.subtasks.children import Merge, SpawnRequest
from normalize.task import Action, ActionResult, ResultStatus, Wait
from normalize.tools.base import ToolContext

_VALUED = {"--model": "model", "-m": "model", "--budget": "budget", "--max-turns": "turns",
           "--merge": "merge", "--attempts": "attempts", "--pick": "pick"}
_SWITCHES = {"--isolated": "isolated", "--keep": "keep"}


def parse_spawn(action: Action) -> SpawnRequest:
    """The request a `spawn` action makes; a `ToolError` naming a bad argument."""
    values: dict[str, str] = {}
    switches: set[str] = set()
    words = action.args
    goal: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name, _, inline = word.partition("=")
        if not goal and name in _VALUED:
            if not inline and index + 1 >= len(words):
                raise ToolError(f"spawn: {name} needs a value")
            values[_VALUED[name]] = inline or words[index + 1]
            index += 1 if inline else 2
        elif not goal and word in _SWITCHES:
            switches.add(_SWITCHES[word])
            index += 1
        elif not goal and word.startswith("--"):
            raise ToolError(f"spawn: unknown option {word} (known: "
                            f"{', '.join([*_VALUED, *_SWITCHES])})")
        else:
            goal.append(word)
            index += 1
    text = (action.body or " ".join(goal)).strip()
    if not text:
        raise ToolError("spawn needs a goal: spawn [--isolated] GOAL")
    attempts = _whole(_number(values, "attempts", int)) or 1
    if values.get("pick") and attempts < 2:
        raise ToolError("spawn: --pick goes with --attempts N (2 or more)")
    answer, steps = action.params.get("answer"), action.params.get("workflow")
    return SpawnRequest(goal=text, key=action.key, model=values.get("model") or None,
                        answer=answer if isinstance(answer, str) else "",
                        workflow=steps if isinstance(steps, dict) else None,
                        budget_usd=_number(values, "budget", float),
                        max_turns=_whole(_number(values, "turns", int)),
                        isolated="isolated" in switches or attempts > 1, merge=_merge(values),
                        keep="keep" in switches, attempts=attempts,
                        pick=values.get("pick", "").strip())


def _number(values: dict[str, str], name: str, kind: type[float] | type[int]) -> float | None:
    raw = values.get(name)
    if raw is None:
        return None
    try:
        number = kind(raw.removeprefix("$"))
    except ValueError:
        raise ToolError(f"spawn: --{_flag(name)} {raw!r} is not a "
                        f"{'whole ' if kind is int else ''}number") from None
    if number <= 0:
        raise ToolError(f"spawn: --{_flag(name)} must be above 0")
    return number


def _flag(name: str) -> str:
    return "max-turns" if name == "turns" else name


def _whole(number: float | None) -> int | None:
    return None if number is None else int(number)


def _merge(values: dict[str, str]) -> Merge:
    merge = values.get("merge", "apply")
    if merge == "apply":
        return "apply"
    if merge == "none":
        return "none"
    raise ToolError(f"spawn: --merge {merge!r}: choose apply or none")


class SpawnTool:
    """Starts a sub-task and answers with its outcome."""

    name: ClassVar[str] = "spawn"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "start a sub-task; its outcome comes back"
    concurrent: ClassVar[bool] = True  # spawns in one decision run together
    reattaches: ClassVar[bool] = True  # run again after a crash, it finds the same child
    previewed: ClassVar[bool] = False

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        request = parse_spawn(action)
        if ctx.children is None or ctx.on_child is None:
            raise ToolError("spawn is not available in this run (no sub-tasks here)")
        outcome = ctx.children.spawn(request, ctx.on_child)
        data = outcome.to_dict()
        if outcome.question:  # the child waits for a person: so does this task
            asks = f"sub-task {outcome.child_id} asks: {outcome.question}"
            return ActionResult(ResultStatus.ERROR, outcome.text(), data=data,
                                error=f"{asks} (answer it: `normalize resume "
                                      f"{outcome.child_id} --answer TEXT`)",
                                wait=Wait(kind="child", question=asks, action=action))
        if outcome.unmerged:  # a full disk, say: the task stops, and its resume retries
            why = (f"the changes of sub-task {outcome.child_id} could not be applied to the "
                   f"workspace ({outcome.unmerged}); make room, then `normalize resume "
                   f"{ctx.task_id}` applies them")
            return ActionResult(ResultStatus.ERROR, outcome.text(), data=data, error=why,
                                wait=Wait(kind="child", question=why, action=action))
        if outcome.error and ctx.cancel.cancelled:
            return ActionResult(ResultStatus.CANCELLED, outcome.text(), error=outcome.error,
                                data=data)
        if outcome.ok:
            return ActionResult.success(outcome.text(), data=data)
        return ActionResult.failure(outcome.error or "; ".join(outcome.conflicts) or
                                    f"the child ended {outcome.status}", outcome.text(),
                                    data=data)
