"""The conversation strategy: every reply and result as messages, compacted past a size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from normalize.execution.context.base import ContextStrategy
from normalize.execution.context.results import Compaction, Message, Prompt, ResultEntry, Veto
from normalize.task import Action, ActionResult

KEEP_RECENT_TURNS = 2  # results of the last turns are never compacted


class ConversationContext(ContextStrategy):
    """Every reply and result as messages, the baseline; old results compact past a size.

    Compaction is deterministic: when the messages exceed
    `compact_after_chars`, the oldest results (never those of the last
    KEEP_RECENT_TURNS turns) are replaced by their first lines and their
    fetch id, oldest first, until the messages fit in half the threshold.
    A `veto` (the person's `before_compact` hooks) is asked first, with what
    the compaction would do; its reason leaves the context whole this turn.
    """

    name = "conversation"
    bounded = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.turns: list[dict[str, Any]] = []  # {"reply", "results", "feedback"}
        self.intro_feedback: list[str] = []

    def add_reply(self, text: str, prose: str, turn: int) -> None:
        if self.turns:
            self.turns[-1]["feedback"] = list(self.feedback)
        else:
            self.intro_feedback = list(self.feedback)
        super().add_reply(text, prose, turn)
        self.turns.append({"turn": turn, "reply": text, "results": []})

    def add_result(self, action: Action, result: ActionResult, turn: int) -> ResultEntry:
        entry = super().add_result(action, result, turn)
        if self.turns:
            self.turns[-1]["results"].append(entry)
        return entry

    def build(self, goal: str, turn: int, veto: Veto | None = None,
              extra_chars: int = 0) -> Prompt:
        plan = self._plan(goal, turn, extra_chars)
        if plan is None:
            return Prompt(self._messages(goal, turn))
        picked, estimate = plan
        reason = veto(estimate) if veto is not None else None
        if reason is not None:
            return Prompt(self._messages(goal, turn), kept=(estimate, reason))
        for record, index in picked:
            record["results"][index] = record["results"][index].compact()
        after = sum(len(m["content"]) for m in self._messages(goal, turn)) + extra_chars
        compaction = Compaction(estimate.before_chars, after, len(picked))
        return Prompt(self._messages(goal, turn), compaction)

    def render(self, goal: str, turn: int) -> str:
        return "\n\n".join(m["content"] for m in self._messages(goal, turn))

    def _messages(self, goal: str, turn: int) -> list[Message]:
        intro = [f"# Task\n{goal.strip()}"]
        notes = self._live_notes(turn)
        feedback = self.intro_feedback if self.turns else self.feedback
        if feedback:
            intro.append("## From normalize\n" + "\n".join(f"- {f}" for f in feedback))
        messages: list[Message] = [{"role": "user", "content": "\n\n".join(intro) + "\n"}]
        for index, record in enumerate(self.turns):
            last = index == len(self.turns) - 1
            messages.append({"role": "assistant", "content": record["reply"] or "(empty)"})
            parts = [r.render(self.marker) for r in record["results"]]
            feedback = self.feedback if last else record.get("feedback", [])
            if last and notes:
                parts.append("## Notes\n" + "\n".join(f"- {n}" for n in notes))
            if feedback:
                parts.append("## From normalize\n" + "\n".join(f"- {f}" for f in feedback))
            messages.append({"role": "user",
                             "content": "\n\n".join(parts) if parts else "(nothing ran)"})
        return messages

    def _plan(self, goal: str, turn: int, extra_chars: int = 0
              ) -> tuple[list[tuple[dict[str, Any], int]], Compaction] | None:
        """The results a compaction would shrink, and what it would do (the size estimated,
        with `extra_chars` of transient messages)."""
        if not self.compact_after_chars:
            return None
        before = sum(len(m["content"]) for m in self._messages(goal, turn)) + extra_chars
        if before <= self.compact_after_chars:
            return None
        target = self.compact_after_chars // 2
        size, picked = before, []
        for record in self.turns[: max(len(self.turns) - KEEP_RECENT_TURNS, 0)]:
            for index, entry in enumerate(record["results"]):
                if size <= target:
                    break
                if entry.compacted:
                    continue
                small = entry.compact()
                size -= len(entry.render(self.marker)) - len(small.render(self.marker))
                picked.append((record, index))
        if not picked:
            return None
        return picked, Compaction(before, size, len(picked))

    def snapshot(self) -> dict[str, Any]:
        state = super().snapshot()
        state["turns"] = [{**t, "results": [r.to_dict() for r in t["results"]]}
                          for t in self.turns]
        state["intro_feedback"] = list(self.intro_feedback)
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        super().restore(state)
        self.turns = [{**t, "results": [ResultEntry.from_dict(r) for r in t.get("results", [])]}
                      for t in state.get("turns", [])]
        self.intro_feedback = [str(f) for f in state.get("intro_feedback", [])]
