"""Context strategies: how a model-driven task's history becomes the next prompt.

    strategy       what the model sees each turn                                 prompt size
    task_tree      the goal, the path from the task to the current subtask,      bounded
                   live notes, the last turn's results, one line per earlier
                   action (the last `max_history` lines plus a count of older)
    task_list      the same, with the whole subtask checklist instead of a path  bounded
    flat           the goal, live notes, the last `max_results` results          bounded
    conversation   every reply and every result, as alternating messages;        grows
                   past `compact_after_chars` old results shrink to previews
    none           the goal alone (stateless: one-shot decisions)                constant

A strategy is plain state plus rendering: the driver feeds it (`add_reply`,
`add_result`, `add_note`, `add_plan`, `close_subtask`, `add_feedback`) and asks
for the next prompt with `build(goal, turn)`. `snapshot()`/`restore()` carry
the state across processes; under every strategy but `conversation` that
state is bounded, so a task file does not grow with its turn count.

Subtasks (task_tree and task_list only):

- `plan A; B; C` adds A, B and C as subtasks of the current subtask (at first,
  the task itself) and makes A current.
- `done SUMMARY` while a subtask is current closes it (its summary is kept, its
  notes end) and makes the next open subtask current: the next open sibling,
  or else the parent. The task goes on.
- `done` while the task itself is current (no plan, or every subtask closed)
  ends the task.

Under flat, conversation and none a plan is only a result, and `done` ends
the task. Notes: `note TEXT` lives until its subtask closes (the whole task
when no subtask is current); `note --turns N TEXT` is shown in the next N
prompts. Another caller picks a strategy by name with `make_context(name,
**options)`; plugins add theirs with `register_context`.

Results (and the history lines, which quote them) reach the model between
`<<result TAG>>` and `<<end TAG>>` lines, TAG being a random marker per task
kept in the strategy's state (`marker`); see `results`.

Where things are: `base` (the shared state and feeding API), `results` (a
result as the model sees it, the prompt, `signature`), `plans` (task_tree,
task_list), `simple` (flat, none), `conversation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from normalize.errors import ConfigError
from normalize.execution.context.base import ContextStrategy
from normalize.execution.context.conversation import ConversationContext
from normalize.execution.context.plans import TaskListContext, TaskTreeContext
from normalize.execution.context.simple import FlatContext, NoContext

__all__ = ["CONTEXTS", "DEFAULT_CONTEXT", "make_context", "register_context"]

ContextFactory = Callable[..., ContextStrategy]

CONTEXTS: dict[str, ContextFactory] = {
    "task_tree": TaskTreeContext,
    "task_list": TaskListContext,
    "flat": FlatContext,
    "conversation": ConversationContext,
    "none": NoContext,
}
"""Context strategies by name; `register_context` adds one."""

DEFAULT_CONTEXT = "task_tree"
OPTIONS = ("max_results", "max_history", "result_chars", "compact_after_chars")


def register_context(name: str, factory: ContextFactory, *, replace: bool = False) -> None:
    """Register a strategy under `name` (refuses to shadow one unless `replace`)."""
    if not replace and name in CONTEXTS and CONTEXTS[name] is not factory:
        raise ConfigError(f"context strategy {name!r} is already registered")
    CONTEXTS[name] = factory


def make_context(name: str | None = None, **options: Any) -> ContextStrategy:
    """A fresh strategy by name (default task_tree) with `[workflow.context]` options.

    `strategy` among the options is ignored (it is the name); an unknown name
    or option is a ConfigError naming it.
    """
    name = name or options.pop("strategy", None) or DEFAULT_CONTEXT
    options.pop("strategy", None)
    factory = CONTEXTS.get(name)
    if factory is None:
        raise ConfigError(f"unknown context strategy {name!r} "
                          f"(choose from {', '.join(sorted(CONTEXTS))})")
    for key in options:
        if key not in OPTIONS:
            raise ConfigError(f"unknown context option {key!r} "
                              f"(expected {', '.join(OPTIONS)})")
    return factory(**options)
