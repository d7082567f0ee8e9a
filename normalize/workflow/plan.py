"""A workflow's plan as text: steps and states with variables resolved, nothing run.

Used by `normalize run --dry-run` and `normalize workflows show`. Variables
known before the run (`[workflow.vars]`, `--var`, `{task}`, `{workspace}`)
are filled in; captured ones and loop items stay as `{name}`. A `for_each`
over a list variable, `files:` or `lines:` shows how many items it has now.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from normalize.contract.driver import driver_traits
from normalize.errors import NormalizeError
from normalize.tables import LLMTable, given
from normalize.workflow.interpolate import interpolate, interpolate_known
from normalize.workflow.spec import StateSpec, StepSpec, WorkflowSpec


def _fill(text: str | None, values: dict[str, Any]) -> str:
    """Interpolate what is known; leave `{captured}` and `{item}` as written."""
    return "" if text is None else interpolate_known(text, values)


def _count(source: str, values: dict[str, Any], workspace: Path | None) -> str:
    if workspace is None:
        return ""
    from normalize.workflow.sources import resolve_items

    kind, sep, _ = source.partition(":")
    if sep and kind not in ("files", "lines", "code"):
        return ""  # a plugin: it may be slow, or need the run
    try:
        items = resolve_items(interpolate(source, values) if sep else source, workspace, values)
    except (NormalizeError, OSError, KeyError):
        return ""
    return f" ({len(items)} item{'s' if len(items) != 1 else ''} now)"


def _strategies(table: dict[str, Any], default: str) -> str:
    if not table:
        return default
    rest = ", ".join(f"{k}={v}" for k, v in table.items() if k != "strategy")
    return str(table.get("strategy", default)) + (f" ({rest})" if rest else "")


def describe(spec: WorkflowSpec, goal: str = "", workspace: Path | None = None) -> list[str]:
    """The plan of `spec`, one line per step, state or transition."""
    values: dict[str, Any] = {"task": goal or spec.description or spec.name,
                              "workspace": str(workspace or "."), "notes": "", **spec.vars}
    out = [f"workflow {spec.name} ({spec.driver}) from {spec.path}"]
    if spec.description:
        out.append(f"  {spec.description}")
    if spec.vars:
        out.append("vars: " + ", ".join(f"{k}={v!r}" for k, v in spec.vars.items()))
    out.append(f"strategies: context={_strategies(given(spec.context), 'task_tree')} · "
               f"cache={_strategies(given(spec.cache), 'persistent')} · "
               f"retry={_strategies(given(spec.retry), 'none')}")
    limits = given(spec.limits)
    if limits:
        out.append("limits: " + ", ".join(f"{k}={v}" for k, v in limits.items()))
    if spec.steps:
        out.append("steps:")
        _steps(out, spec, spec.steps, values, workspace, "  ", "")
    if spec.states:
        out.append("states:")
        for state in spec.states:
            _state(out, spec, state, values, workspace)
    if driver_traits(spec.driver).reads_llm_settings:
        llm = spec.llm or LLMTable()
        out.append(f"a model decides each step: {llm.provider}:{llm.model}")
    return out


def _short(text: str, width: int = 72) -> str:
    """The first line of a prompt, clipped."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    more = len(line) > width or len(text.strip().splitlines()) > 1
    return f"\"{line[:width].rstrip()}{'…' if more else ''}\""


def _what(step: StepSpec, values: dict[str, Any]) -> str:
    if step.workflow:
        return f"workflow {step.workflow}"
    if step.action:
        text = _fill(step.action, values)
        if step.prompt:
            text += f" — {_short(_fill(step.prompt, values))}"
        return text
    return ""


def _steps(out: list[str], spec: WorkflowSpec, steps: Sequence[StepSpec], values: dict[str, Any],
           workspace: Path | None, pad: str, prefix: str) -> None:
    for index, step in enumerate(steps, 1):
        number = f"{prefix}{index}"
        head = []
        if step.condition:
            head.append(f"if {_fill(step.condition, values)}")
        if step.for_each:
            source = step.for_each if ":" not in step.for_each else _fill(step.for_each, values)
            fan = (f" in parallel (at most {step.max_concurrency} at once)"
                   if step.parallel else "")
            head.append(f"for each {{{step.as_}}} in {source}"
                        f"{_count(step.for_each, values, workspace)}{fan}")
        if step.until:
            head.append(f"until {_fill(step.until, values)} (at most {step.max_iterations} "
                        f"iterations)")
        extras = []
        for key in ("context", "cache"):
            if getattr(step, key):
                extras.append(f"{key}={getattr(step, key)}")
        if step.retry:
            extras.append(f"retry={_strategies(given(step.retry), 'none')}")
        if step.capture:
            extras.append(f"→ {{{step.capture}}}")
        if step.transform:
            extras.append(f"transform {step.transform}")
        if step.on_error != "fail":
            extras.append(f"on_error={step.on_error}")
        if step.timeout:
            extras.append(f"timeout={step.timeout:g}s")
        if step.max_turns:
            extras.append(f"max_turns={step.max_turns}")
        lead = f"{pad}{number}. {step.name}"
        if head:
            lead += " [" + "; ".join(head) + "]"
        what = _what(step, values)
        tail = f"  ({'; '.join(extras)})" if extras else ""
        out.append(f"{lead}: {what}{tail}" if what else f"{lead}{tail}")
        if step.steps:
            _steps(out, spec, step.steps, values, workspace, pad + "   ", f"{number}.")
        if step.otherwise:
            out.append(f"{pad}   else:")
            _steps(out, spec, step.otherwise, values, workspace, pad + "   ", f"{number}.else.")
        if step.workflow and step.workflow in spec.includes:
            _nested(out, spec.includes[step.workflow], values, workspace, pad + "   ")


def _nested(out: list[str], data: dict[str, Any], values: dict[str, Any],
            workspace: Path | None, pad: str) -> None:
    sub = WorkflowSpec.from_dict(data)
    sub_values = {**values, **sub.vars, **{k: values[k] for k in sub.vars if k in values}}
    if sub.steps:
        _steps(out, sub, sub.steps, sub_values, workspace, pad, "")
    for state in sub.states:
        _state(out, sub, state, sub_values, workspace, pad)


def _state(out: list[str], spec: WorkflowSpec, state: StateSpec, values: dict[str, Any],
           workspace: Path | None, pad: str = "  ") -> None:
    if state.terminal:
        summary = f": {_fill(state.summary, values)}" if state.summary else ""
        out.append(f"{pad}{state.name} (terminal, {state.status}){summary}")
        return
    what = f"workflow {state.workflow}" if state.workflow else _fill(state.action, values)
    if state.prompt:
        what += f" — {_short(_fill(state.prompt, values))}"
    extras = []
    if state.on_entry:
        extras.append(f"on_entry: {_fill(state.on_entry, values)}")
    if state.on_exit:
        extras.append(f"on_exit: {_fill(state.on_exit, values)}")
    if state.capture:
        extras.append(f"→ {{{state.capture}}}")
    if state.timeout:
        extras.append(f"timeout={state.timeout:g}s")
    if state.max_turns:
        extras.append(f"max_turns={state.max_turns}")
    tail = f"  ({'; '.join(extras)})" if extras else ""
    out.append(f"{pad}{state.name}: {what or '(no action)'}{tail}")
    if state.workflow and state.workflow in spec.includes:
        _nested(out, spec.includes[state.workflow], values, workspace, pad + "    ")
    for t in state.transitions:
        how = "the model picks" if t.condition == "llm" else f"on {t.condition}"
        out.append(f"{pad}  {how} → {t.next}")
