"""Conditions on an action's result: built-ins and plugins (`normalize.conditions`).

    success · failure · always · contains:TEXT · not_contains:TEXT ·
    matches:REGEX · exit_code:N · var:NAME (the variable is set and not empty) ·
    visits:N (a state machine's state was entered at least N times)

A plugin condition is a callable `(result, argument, variables) -> bool`
registered under a name; `name:argument` passes the part after the colon.
`llm` is decided by a model, so drivers handle it themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from normalize.errors import ConfigError
from normalize.plugins import PluginGroup
from normalize.task import ActionResult, ResultStatus

ConditionFn = Callable[[ActionResult | None, str, Mapping[str, Any]], bool]



def _builtin_conditions() -> dict[str, str]:
    return {"py": "normalize.workflow.flow:python_condition"}


CONDITIONS: PluginGroup[ConditionFn] = PluginGroup("normalize.conditions", _builtin_conditions)


def is_condition(name: str) -> bool:
    """Whether `name` (or `name:arg`) names a plugin condition that loads."""
    kind = name.partition(":")[0]
    if kind not in CONDITIONS:
        return False
    try:
        CONDITIONS.get(kind)
    except KeyError:  # a broken plugin: recorded in CONDITIONS.warnings
        return False
    return True


def evaluate(condition: str, result: ActionResult | None, variables: Mapping[str, Any]) -> bool:
    """Whether `condition` holds for `result` (None: no action ran yet)."""
    ok = result is not None and result.status is ResultStatus.SUCCESS
    text = "" if result is None else (result.output or result.preview) + (result.error or "")
    if condition == "always":
        return True
    if condition == "success":
        return ok
    if condition == "failure":
        return result is not None and not ok
    kind, _, arg = condition.partition(":")
    if kind == "contains":
        return arg in text
    if kind == "not_contains":
        return arg not in text
    if kind == "matches":
        return re.search(arg, text, re.MULTILINE) is not None
    if kind == "exit_code":
        return result is not None and result.exit_code == int(arg)
    if kind == "var":
        return bool(variables.get(arg))
    if kind == "visits":
        return int(variables.get("visits", 0)) >= int(arg)
    try:
        check = CONDITIONS.get(kind)
    except KeyError:
        why = "; ".join(w for w in CONDITIONS.warnings if f"plugin {kind!r}" in w)
        raise ConfigError(f"condition {condition!r}: " + (why or "no such condition")) from None
    return check(result, arg, variables)
