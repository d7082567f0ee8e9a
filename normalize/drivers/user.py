"""The user driver: a person types commands; each line (with its body) is one decision."""

from __future__ import annotations

from typing import Any, ClassVar

from normalize.contract.driver import DriverServices, LineReader, RunContext
from normalize.errors import UsageError
from normalize.events import Notice
from normalize.intents import parse, to_decision
from normalize.task import Action, ActionResult, Decision, Task

HEREDOC_PROMPT = "… "


class UserDriver:
    """Reads command text from `read_line` until `done` or end of input."""

    name: ClassVar[str] = "user"
    bound_by_limits: ClassVar[bool] = False  # a model's turn and cost limits never bind a person
    shows_results: ClassVar[bool] = True  # a person reads every result

    def __init__(self, read_line: LineReader | None) -> None:
        self.read_line = read_line
        self.commands = 0

    @classmethod
    def from_config(cls, config: dict[str, Any], services: DriverServices) -> UserDriver:
        del config
        return cls(services.read_line)

    def snapshot(self) -> dict[str, Any]:
        return {"commands": self.commands}

    def restore(self, state: dict[str, Any]) -> None:
        self.commands = int(state.get("commands", 0))

    def _read(self, prompt: str) -> str | None:
        if self.read_line is None:
            raise UsageError("the user driver needs a terminal or piped input to read commands")
        return self.read_line(prompt)

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        while True:
            line = self._read(f"[{task.id} {task.turn + 1}] › ")
            if line is None:
                return Decision.finish("input ended")
            if not line.strip():
                continue
            text = line
            tag = _heredoc_tag(line) if "\n" not in line else None  # a reader may give the body
            while tag is not None:
                more = self._read(HEREDOC_PROMPT)
                if more is None:
                    break
                text += "\n" + more
                if more == tag:
                    break
            parsed = parse(text)
            for correction in parsed.corrections:
                ctx.emit(Notice(message=f"read `{correction.word}` as "
                                        f"`{correction.corrected_to}`"))
            if not parsed.actions and not parsed.done:
                hint = "; ".join(parsed.suggestions) or "type a command, e.g. `view .`, or `done`"
                ctx.emit(Notice(level="warning", message=f"not a command: {line.strip()} ({hint})"))
                continue
            self.commands += 1
            return to_decision(parsed)

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del task, action, result


def _heredoc_tag(line: str) -> str | None:
    marker = line.rfind("<<")
    if marker < 0:
        return None
    tag = line[marker + 2:].strip().lstrip("-").strip("'\"")
    return tag if tag.isidentifier() else None
