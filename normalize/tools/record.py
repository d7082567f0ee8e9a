"""`record`: a step for a change someone the task answers for already made (an ACP agent
that changed files inside itself, not through the client's `fs/write_text_file`).

The action changes nothing; the engine records the workspace after it as usual, but its
step counts everything since the task's last step (the tool declares `records_earlier`),
so `diff STEP` and `undo --to` address the agent's change on its own. Drivers emit it;
it is no verb of the command language, and there is nothing to approve.
"""

from __future__ import annotations

from typing import ClassVar

from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext


class RecordTool:
    """Records the workspace as it is now, as a step of its own; changes nothing."""

    name: ClassVar[str] = "record"
    read_only: ClassVar[bool] = False  # a step is taken after it
    summary: ClassVar[str] = "a step for what the task's agent changed inside itself"
    records_earlier: ClassVar[bool] = True  # its step counts from the task's last step
    reattaches: ClassVar[bool] = True  # run again after a crash, it records the same change

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        what = str(action.params.get("title") or " ".join(action.args) or "the agent's change")
        return ActionResult.success(f"recorded what {what} changed")
