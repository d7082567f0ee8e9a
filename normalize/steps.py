"""Step kinds: plugins a workflow names in `action` (`llm-decide`, …).

Registered like drivers (entry-point group `normalize.steps`). A step kind is
a callable `(config, services) -> Driver`: the workflow hands that driver
the decisions until it is done (see `normalize.workflow.delegate` for the
config it receives). A step kind reaches other drivers through the driver
registry (`create_driver`), never by importing one. Built in:

    llm-decide [TEXT]   a model works on TEXT (or the step's `prompt`) until it
                        says `done` or the step's `max_turns` is reached
"""

from __future__ import annotations

from typing import Any

from normalize.contract.driver import Driver, DriverServices, create_driver
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
    """The `llm-decide` step: the `llm` driver bounded by the step, on the step's goal."""
    goal = str(config.get("goal") or "")
    if config.get("notes"):
        goal += f"\n\nNotes from the workflow:\n{config['notes']}"
    llm_config = {
        "llm": config.get("llm") or {},
        "context": {"strategy": config.get("context") or "task_tree"},
        # the goal is already filled in; braces in it are literal text
        "goal": goal.replace("{", "{{").replace("}", "}}") if goal else None,
    }
    return create_driver("llm", llm_config, services)
