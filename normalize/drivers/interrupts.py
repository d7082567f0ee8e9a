"""What a workflow does with a side effect whose outcome is unknown after a crash.

On resume the engine hands the driver an `interrupted` result for an action
that started but never finished. A step (or state) says what follows in its
`on_interrupt`, falling back to the workflow's:

    rerun   run the action again
    fail    count it as failed (then `on_error` / the transitions apply)
    ask     ask the person: yes runs it again, no counts it as failed

Unset, it is `ask` when a person is at the terminal and `fail` otherwise (CI).
`ask` is an `ask` action of kind "interrupt": answered at the prompt on a
terminal, else the task waits (exit 4) for `resume --answer yes|no`.
"""

from __future__ import annotations

from normalize.task import Action, ActionResult

POLICIES = ("rerun", "fail", "ask")

YES = frozenset({"y", "yes", "rerun", "again", "retry"})
NO = frozenset({"n", "no", "fail"})


def interrupt_policy(*configured: str | None, interactive: bool) -> str:
    """The first configured policy, else `ask` on a terminal and `fail` without one."""
    for policy in configured:
        if policy in POLICIES:
            return policy
    return "ask" if interactive else "fail"


def interrupt_question(what: str, command: str) -> Action:
    """The `ask` action that asks whether to run an interrupted action again."""
    question = (f"{what} was running when normalize stopped, so its outcome is unknown: "
                f"`{command}`. Run it again? (yes: run it again / no: count it as failed)")
    return Action("ask", {"args": [question], "kind": "interrupt"}, text=f"ask {question}")


def rerun_answer(result: ActionResult) -> bool | None:
    """True to run again, False to count as failed, None when the answer is neither."""
    answer = str(result.data.get("answer", "")).strip().lower()
    if not answer and result.output.startswith("The user answered: "):
        answer = result.output.removeprefix("The user answered: ").strip().lower()
    if answer in YES:
        return True
    if answer in NO:
        return False
    return None
