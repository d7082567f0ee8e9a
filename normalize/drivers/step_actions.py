"""What the workflow and state-machine drivers share: a step's text as an Action.

Interpolation with clear errors (`fill`), a step's `transform`, whether its
action names a step kind, and the config of a delegated step's sub-driver.
"""

from __future__ import annotations

import json
import re
from typing import Any

from normalize.errors import ConfigError, UsageError
from normalize.execution.scope import ROOT_CACHE, ROOT_CONTEXT, ROOT_RETRY, Resolved
from normalize.intents import parse_command, verb_for
from normalize.tables import LLMTable, given
from normalize.task import Action
from normalize.workflow.argv import bind_command
from normalize.workflow.interpolate import interpolate
from normalize.workflow.spec import StepSpec, WorkflowSpec

RESULT_KEEP = 20_000  # characters of the last result kept for conditions


def apply_transform(transform: str | None, text: str,
                    values: dict[str, Any] | None = None) -> Any:
    """`json:a.b` (a field), `regex:PATTERN` (group 1, or the match), `lines`, `strip`,
    `format:TEXT` (TEXT with the step's variables and `{result}` filled in)."""
    if not transform:
        return text
    kind, _, arg = transform.partition(":")
    if kind == "format":
        return fill(arg, {**(values or {}), "result": text}, "transform")
    if kind == "json":
        value: Any = json.loads(text)
        for part in filter(None, arg.split(".")):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value
    if kind == "regex":
        match = re.search(arg, text, re.MULTILINE)
        if match is None:
            return ""
        return match.group(1) if match.groups() else match.group(0)
    if kind == "lines":
        return [ln for ln in text.splitlines() if ln.strip()]
    if kind == "strip":
        return text.strip()
    raise ConfigError(f"unknown transform {transform!r} (json:FIELD, regex:PATTERN, lines, "
                      f"strip, format:TEXT)")


def fill(text: str, variables: dict[str, Any], where: str) -> str:
    """Interpolate `text`; a variable not set yet is a clear error naming it."""
    try:
        return interpolate(text, variables)
    except (KeyError, IndexError, TypeError) as exc:
        name = exc.args[0] if exc.args else "?"
        raise UsageError(f"{where}: variable {{{name}}} is not set (the step that captures it "
                         f"did not run or did not succeed)") from None


def action_for(text: str, variables: dict[str, Any], step: StepSpec | None = None, *,
               timeout: float | None = None) -> Action:
    """Parse a step's interpolated command into an Action (with its `timeout`, if any)."""
    command = fill(text, variables, f"step {step.name!r}" if step else "action")
    head, _, rest = command.strip().partition(" ")
    verb = verb_for(head)
    if verb is not None and verb.name == "done":
        # a summary is free text: captured values may span lines or hold quotes
        return Action("done", {"args": [rest.strip()] if rest.strip() else [], "body": None},
                      text=command)
    action = bind_command(text, variables, parse_command)  # values are arguments, not text
    timeout = timeout if timeout is not None else (step.timeout if step is not None else None)
    if timeout is not None:
        action.params["timeout"] = timeout
    return action


def step_kind_of(text: str | None) -> str | None:
    """The step kind an action names (`llm-decide …`), if it names one."""
    if not text or not text.strip():
        return None
    from normalize.workflow.steps import is_step_kind

    first = text.split(None, 1)[0]
    return first if is_step_kind(first) else None


def delegate_config(kind: str, text: str, values: dict[str, Any], *, name: str,
                    prompt: str | None, max_turns: int | None, llm: LLMTable | None,
                    settings: Resolved, notes: str) -> dict[str, Any]:
    """What a step kind's sub-driver is built from (plain JSON, kept for resume)."""
    words = fill(text, values, f"step {name!r}").split(None, 1)
    args = words[1] if len(words) > 1 else ""
    prompt_text = fill(prompt, values, f"step {name!r}") if prompt else ""
    plain = {k: v for k, v in values.items() if isinstance(v, str | int | float | bool | list)}
    return {"kind": kind, "name": name, "args": args, "prompt": prompt_text,
            "goal": prompt_text or args or str(values.get("task", "")),
            "max_turns": max_turns, "llm": None if llm is None else llm.to_dict(),
            "context": settings.context,
            "cache": settings.cache, "retry": settings.retry, "notes": notes, "vars": plain}


def root_settings(spec: WorkflowSpec) -> Resolved:
    """The workflow's own strategies (`[workflow.context]`, `.cache`, `.retry`)."""
    return Resolved(
        context=spec.context.strategy or ROOT_CONTEXT,
        cache=given(spec.cache) or {"strategy": ROOT_CACHE},
        retry=given(spec.retry) or {"strategy": ROOT_RETRY},
    )
