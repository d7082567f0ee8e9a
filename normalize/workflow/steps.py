"""Step kinds: plugins a workflow names in `action` (`llm-decide`, …).

Registered like drivers (entry-point group `normalize.steps`). A step kind is
a callable `(config, services) -> Driver`: the workflow hands that driver
the decisions until it is done (see `normalize.workflow.delegate` for the
config it receives). A step kind reaches other drivers through the driver
registry (`create_driver`), never by importing one. Built in:

    llm-decide [TEXT]   a model works on TEXT (or the step's `prompt`) until it
                        says `done` or the step's `max_turns` is reached
    claude [TEXT]       a harness (Claude Code, Codex, aider: docs/harnesses.md)
    codex [TEXT]        takes one turn on TEXT (or the step's `prompt`) in
    aider [TEXT]        normalize's sandbox
"""

from __future__ import annotations

from typing import Any

from normalize.contract.driver import Driver, DriverServices, create_driver
from normalize.plugins import PluginGroup

HARNESS_KINDS = ("claude", "codex", "aider")
"""The step kinds that hand the step to another agent (a step's `harness = NAME`)."""


def _builtin_steps() -> dict[str, str]:
    return {"llm-decide": "normalize.workflow.steps:llm_decide",
            **{name: f"normalize.workflow.steps:{name}" for name in HARNESS_KINDS}}


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


def _harness(name: str, config: dict[str, Any], services: DriverServices) -> Driver:
    """A harness step: that harness's driver on the step's goal (its turn ends the step)."""
    goal = str(config.get("goal") or "")
    if config.get("notes"):
        goal += f"\n\nNotes from the workflow:\n{config['notes']}"
    return create_driver(name, {"llm": config.get("llm") or {}, "goal": goal}, services)


def claude(config: dict[str, Any], services: DriverServices) -> Driver:
    """The `claude` step: Claude Code takes a turn on the step's goal."""
    return _harness("claude", config, services)


def codex(config: dict[str, Any], services: DriverServices) -> Driver:
    """The `codex` step: Codex CLI takes a turn on the step's goal."""
    return _harness("codex", config, services)


def aider(config: dict[str, Any], services: DriverServices) -> Driver:
    """The `aider` step: aider takes a turn on the step's goal."""
    return _harness("aider", config, services)
