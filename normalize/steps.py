"""Step kinds: plugins a workflow names in `action` (`llm-decide`, …).

Registered like drivers (entry-point group `normalize.steps`).
"""

from __future__ import annotations

from typing import Any

from normalize.plugins import PluginGroup

STEPS: PluginGroup[Any] = PluginGroup("normalize.steps", dict)


def is_step_kind(name: str) -> bool:
    """Whether `name` is a registered step kind."""
    return name in STEPS
