"""`permit`: normalize's approval policy answering an agent that asks before it acts.

An ACP agent that runs its own shell or edits files inside itself (codex-acp, Gemini CLI)
asks its client `session/request_permission` first. The `acp` driver turns the request
into a `permit` action holding the action normalize would judge (`run` with the command's
words, `edit PATH`), and this tool judges it with the task's policy and the very context
the engine's actions get (workspace, sandbox, grants, the person's approver): so the
journal shows each request, and a refusal says why.

It changes nothing itself: allowed, the agent does the thing on its own (inside the
sandbox it runs in). A verdict that needs a person when none can be asked (`ask` or
`auto` without a terminal, `CI=true`) is a refusal, never a yes: the agent's turn cannot
wait for an answer that may come hours later. Drivers emit it; it is no verb of the
command language. It counts as read-only (it changes nothing, so it takes no checkpoint
step): the engine's policy never sees it, and it judges what it holds itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext

NO_PERSON = ("no one can be asked while the agent's turn runs (a non-interactive run), so "
             "it is refused")


def judged(action: Action) -> Action:
    """The action a `permit` holds: what the agent would do, as normalize would judge it."""
    inner: dict[str, Any] = action.params.get("judged") or {}
    tool = str(inner.get("tool") or "run")
    args = [str(word) for word in inner.get("args") or []]
    text = str(inner.get("text") or " ".join([tool, *args]))
    return Action(tool, {"args": args}, text=text)


class PermitTool:
    """Judges what an agent asks permission for; runs nothing."""

    name: ClassVar[str] = "permit"
    read_only: ClassVar[bool] = True  # it changes nothing (no step): it judges by itself
    summary: ClassVar[str] = "normalize's approval policy answering an agent's permission request"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        inner = judged(action)
        if action.params.get("refuse"):  # the driver found it out of bounds already
            return ActionResult.blocked(f"refused `{inner.text}`: {action.params['refuse']}")
        verdict = ctx.policy.check(inner, ctx)
        if verdict is None:
            return ActionResult.success(f"allowed: the agent may {inner.text}")
        if verdict.wait is not None:  # a person must say, and none can be asked now
            return ActionResult.blocked(f"refused `{inner.text}`: it needs a person's approval "
                                        f"and {NO_PERSON}")
        return verdict
