"""Verbs that talk to the driver rather than to the codebase: note, plan, ask, done.

They change nothing on disk; the driver acts on their results (`data`):
a note joins the scope's notes, a plan adds subtasks, `ask` waits for a person.
"""

from __future__ import annotations

from typing import ClassVar

from normalize.errors import ToolError
from normalize.task import Action, ActionResult, Wait
from normalize.tools.base import ToolContext


class NoteTool:
    """`note [--turns N] TEXT`: keep a note in the current scope."""

    name: ClassVar[str] = "note"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "keep a note in the current scope"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        args = action.args
        turns: int | None = None
        if len(args) >= 2 and args[0] == "--turns":
            try:
                turns = int(args[1])
            except ValueError:
                raise ToolError(f"note --turns needs a number, not {args[1]!r}") from None
            args = args[2:]
        text = " ".join(args) or (action.body or "").strip()
        if not text:
            raise ToolError("note needs text: note [--turns N] TEXT")
        until = f" for {turns} turns" if turns else " until the scope ends"
        return ActionResult.success(f"noted{until}: {text}", data={"note": text, "turns": turns})


class RememberTool:
    """`remember TEXT`: propose a memory entry; the task's end puts it in the person's inbox."""

    name: ClassVar[str] = "remember"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "propose a lasting fact about the project for later tasks"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        text = " ".join(action.args) or (action.body or "").strip()
        if text.lower().startswith("that "):
            text = text[5:].strip()
        if not text:
            raise ToolError("remember needs text: remember TEXT")
        return ActionResult.success(
            f"proposed for memory (the user reviews it when the task succeeds): {text}",
            data={"memory": text})


class SkillTool:
    """`skill NAME`: load a skill's instructions; the driver holds the catalog and shows them."""

    name: ClassVar[str] = "skill"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "load a skill's instructions for the rest of the task"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        if len(action.args) != 1:
            raise ToolError("skill takes one name: skill NAME (the Skills catalog lists them)")
        name = action.args[0].lstrip("$")
        return ActionResult.success(f"skill {name} requested", data={"skill": name})


class PlanTool:
    """`plan FIRST; SECOND; …`: add subtasks to the task tree or list."""

    name: ClassVar[str] = "plan"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "add subtasks; the context moves to the first"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        text = " ".join(action.args)
        if action.body:
            text += "\n" + action.body
        steps = [s.strip(" -*\t") for s in text.replace("\n", ";").split(";")]
        steps = [s for s in steps if s]
        if not steps:
            raise ToolError("plan needs subtasks: plan FIRST; SECOND; THIRD")
        listing = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        return ActionResult.success(f"planned {len(steps)} subtasks:\n{listing}",
                                    data={"plan": steps})


class AskTool:
    """`ask QUESTION`: ask the person; without one at hand, the task waits."""

    name: ClassVar[str] = "ask"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "ask the human; the task waits for the answer"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        question = " ".join(action.args) or (action.body or "").strip()
        if not question:
            raise ToolError("ask needs a question: ask QUESTION")
        if ctx.asker is not None:
            answer = ctx.asker(question)
            if answer is not None:
                return ActionResult.success(f"The user answered: {answer}",
                                            data={"question": question, "answer": answer})
        kind = str(action.params.get("kind", "question"))  # "interrupt": run it again?
        return ActionResult.success("", data={"question": question},
                                    wait=Wait(kind=kind, question=question, action=action))


class DoneTool:
    """`done [SUMMARY]`: end the task (drivers read it from the parsed reply)."""

    name: ClassVar[str] = "done"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "end the task"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del ctx
        summary = " ".join(action.args)
        return ActionResult.success(summary or "done", data={"done": True, "summary": summary})
