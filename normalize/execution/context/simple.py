"""The strategies without history: flat (the last N results) and none (the goal alone)."""

from __future__ import annotations

from normalize.execution.context.base import ContextStrategy


class FlatContext(ContextStrategy):
    """The goal, live notes and the last N results: nothing older."""

    name = "flat"

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, history=False)


class NoContext(ContextStrategy):
    """The goal alone (and normalize's feedback): every prompt is the same."""

    name = "none"

    def render(self, goal: str, turn: int) -> str:
        del turn
        out = [f"# Task\n{goal.strip()}"]
        if self.feedback:
            out.append("## From normalize\n" + "\n".join(f"- {f}" for f in self.feedback))
        out.append("Reply with prose and command lines, or `done SUMMARY`.")
        return "\n\n".join(out) + "\n"
