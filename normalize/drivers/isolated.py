"""Workflow steps run as sub-tasks: `isolation = "isolated"` on a `for_each` or a `workflow` step.

Each item of such a `for_each` (its `action`, or its nested `steps`, with the
item bound to `as`) becomes a `spawn` of an isolated child driven by the
workflow driver, and so does a nested `workflow` step: the child works in its
own copy of the workspace, and `merge = "apply"` (the default) applies its
diff back, all or nothing, when it ends (`"none"`: reported only). The
children run side by side when the step is `parallel` (at most its
`max_concurrency`), else one after another, each copy made after the one
before it was applied. The child's steps travel in the spawn action
(`workflow`), with the variables known at that point; its permissions are its
parent's.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from normalize.task import Action
from normalize.workflow.spec import StepSpec, WorkflowSpec

_OWN = frozenset({"task", "workspace", "notes"})  # each child binds its own


def _passed(values: dict[str, Any]) -> dict[str, Any]:
    """The variables a child gets: plain values, not those each task binds for itself."""
    return {k: v for k, v in values.items()
            if k not in _OWN and isinstance(v, str | int | float | bool | list | dict)}


def _alone(step: StepSpec) -> StepSpec:
    """A `for_each` step's action as one step of its own (what one item runs)."""
    return StepSpec(name=step.name, action=step.action, on_error=step.on_error,
                    on_interrupt=step.on_interrupt, context=step.context, cache=step.cache,
                    retry=step.retry, timeout=step.timeout, prompt=step.prompt,
                    max_turns=step.max_turns, line=step.line)


def _spawn(spec: dict[str, Any], step: StepSpec, goal: str) -> Action:
    """The `spawn` of an isolated child that runs `spec`."""
    args = ["--isolated", "--merge", step.merge, goal]
    return Action("spawn", {"args": args, "body": None, "workflow": spec},
                  text=" ".join(["spawn", *map(shlex.quote, args)]))


def item_spawns(spec: WorkflowSpec, step: StepSpec, items: list[Any],
                values: dict[str, Any]) -> list[Action]:
    """One `spawn` per item of an isolated `for_each` step."""
    steps = list(step.steps) or [_alone(step)]
    child = replace(spec, steps=steps, states=[], driver="workflow", output_schema=None)
    out = []
    for item in items:
        variables = {**spec.vars, **_passed(values), step.as_: item}
        shown = item if isinstance(item, str) else repr(item)
        out.append(_spawn(replace(child, vars=variables).to_dict(), step,
                          f"{step.name}: {shown}"))
    return out


def workflow_spawn(step: StepSpec, included: dict[str, Any],
                   values: dict[str, Any]) -> Action:
    """The `spawn` of an isolated `workflow = "sub.toml"` step: the nested workflow as a child."""
    variables = {**included.get("vars", {}),
                 **{k: v for k, v in _passed(values).items() if k in included.get("vars", {})}}
    return _spawn({**included, "vars": variables}, step,
                  f"{step.name}: {included.get('name') or step.workflow}")
