"""Step kinds: plugins a workflow names in `action` (`llm-decide`, …).

Registered like drivers (entry-point group `normalize.steps`). A step kind is
a callable `(config, services) -> Driver`: the workflow hands that driver
the decisions until it is done (see `normalize.workflow.delegate` for the
config it receives). Built in:

    llm-decide [TEXT]   a model works on TEXT (or the step's `prompt`) until it
                        says `done` or the step's `max_turns` is reached
"""

from __future__ import annotations

from typing import Any

from normalize.drivers.base import Driver, DriverServices
from normalize.plugins import PluginGroup


def _builtin_steps() -> dict[str, str]:
    return {"llm-decide": "normalize.steps:llm_decide"}


STEPS: PluginGroup[Any] = PluginGroup("normalize.steps", _builtin_steps)


def is_step_kind(name: str) -> bool:
    """Whether `name` is a registered step kind that loads."""
    if name not in STEPS:
        return False
    try:
        STEPS.get(name)
    except KeyError:  # a broken plugin: recorded in STEPS.warnings
        return False
    return True


def llm_decide(config: dict[str, Any], services: DriverServices) -> Driver:
    """The `llm-decide` step: an LLM driver bounded by the step, on the step's goal."""
    from normalize.drivers.llm import LLMDriver

    goal = str(config.get("goal") or "")
    if config.get("notes"):
        goal += f"\n\nNotes from the workflow:\n{config['notes']}"
    llm_config = {
        "llm": config.get("llm") or {},
        "context": {"strategy": config.get("context") or "task_tree"},
        # the goal is already filled in; braces in it are literal text
        "goal": goal.replace("{", "{{").replace("}", "}}") if goal else None,
    }
    return LLMDriver.from_config(llm_config, services)
