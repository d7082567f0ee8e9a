"""The strategies that track a plan of subtasks: task_tree (the path) and task_list (all)."""

from __future__ import annotations

from normalize.execution.context.base import ContextStrategy, Subtask
from normalize.execution.context.results import LINE_CHARS, clip


class TaskTreeContext(ContextStrategy):
    """The goal, the path to the current subtask, notes, last results, a line per action."""

    name = "task_tree"
    tracks_plan = True

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, plan=self._where(),
                              results=self._last_turn_results())

    def _where(self) -> str:
        if not self.root.children:
            return ""
        path = self._path()
        lines = ["## Where you are"]
        for depth, node in enumerate(path[1:], 1):
            here = "  ← current" if node.id == self.current else ""
            lines.append(f"{'  ' * depth}- {node.title}{here}")
        parent = path[-2] if len(path) > 1 else self.root
        siblings = parent.children
        done = [c for c in siblings if c.status == "done"]
        ahead = [c for c in siblings if c.status == "open" and c.id != self.current]
        if done:
            shown = "; ".join(clip(f"{c.title}: {c.summary}" if c.summary else c.title, 100)
                              for c in done[-3:])
            more = f" (and {len(done) - 3} more)" if len(done) > 3 else ""
            lines.append(f"Done at this level{more}: {shown}")
        if ahead:
            shown = "; ".join(clip(c.title, 80) for c in ahead[:3])
            more = f" (and {len(ahead) - 3} more)" if len(ahead) > 3 else ""
            lines.append(f"Still open here{more}: {shown}")
        if self.current == self.root.id:
            lines.append("Every subtask is done: check the whole task, then `done SUMMARY`.")
        else:
            lines.append("`done SUMMARY` closes the current subtask and moves to the next one.")
        return "\n".join(lines)


class TaskListContext(ContextStrategy):
    """Like task_tree, with the whole checklist of subtasks instead of the path."""

    name = "task_list"
    tracks_plan = True

    def render(self, goal: str, turn: int) -> str:
        return self._sections(goal, turn, plan=self._checklist(),
                              results=self._last_turn_results())

    def _checklist(self) -> str:
        if not self.root.children:
            return ""
        lines = ["## Subtasks"]

        def add(node: Subtask, depth: int) -> None:
            for child in node.children:
                box = "[x]" if child.status == "done" else \
                    "[>]" if child.id == self.current else "[ ]"
                summary = f" — {child.summary}" if child.summary else ""
                lines.append(clip(f"{'  ' * depth}{box} {child.title}{summary}", LINE_CHARS))
                add(child, depth + 1)

        add(self.root, 0)
        lines.append("`done SUMMARY` closes the [>] subtask; when all are [x], it ends the task.")
        return "\n".join(lines)
