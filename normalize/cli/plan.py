"""`normalize run --dry-run`: the plan of a workflow, variables resolved, nothing run."""

from __future__ import annotations

from typing import Any

from normalize.cli.console import Environment
from normalize.workflow.interpolate import interpolate
from normalize.workflow.spec import StepSpec, WorkflowSpec


def _resolve(text: str | None, values: dict[str, Any]) -> str:
    if text is None:
        return ""
    try:
        return interpolate(text, values)
    except (KeyError, IndexError, TypeError):
        return text  # a captured variable, known only at run time


def print_plan(env: Environment, spec: WorkflowSpec, goal: str) -> None:
    values: dict[str, Any] = {"task": goal, "workspace": ".", **spec.vars}
    out = env.stdout
    out.write(f"workflow {spec.name} ({spec.driver}) from {spec.path}\n")
    if spec.vars:
        out.write("vars: " + ", ".join(f"{k}={v!r}" for k, v in spec.vars.items()) + "\n")

    def steps(items: list[StepSpec], depth: int) -> None:
        for index, step in enumerate(items, 1):
            pad = "  " * depth
            what = _resolve(step.action, values) if step.action else \
                (f"workflow {step.workflow}" if step.workflow else "")
            extras = []
            if step.for_each:
                extras.append(f"for each {step.as_} in {_resolve(step.for_each, values)}"
                              + (" (parallel)" if step.parallel else ""))
            if step.condition:
                extras.append(f"if {step.condition}")
            if step.capture:
                extras.append(f"→ {{{step.capture}}}")
            if step.on_error != "fail":
                extras.append(f"on_error={step.on_error}")
            tail = f"  [{'; '.join(extras)}]" if extras else ""
            out.write(f"{pad}{index}. {step.name}: {what}{tail}\n")
            if step.steps:
                steps(step.steps, depth + 1)

    if spec.steps:
        steps(spec.steps, 1)
    for state in spec.states:
        if state.terminal:
            out.write(f"  state {state.name} (terminal)\n")
            continue
        out.write(f"  state {state.name}: {_resolve(state.action, values)}\n")
        for t in state.transitions:
            out.write(f"    on {t.condition} → {t.next}\n")
    if spec.driver == "llm":
        llm = spec.llm or {}
        out.write(f"  a model decides: {llm.get('provider', 'anthropic')}:"
                  f"{llm.get('model', '')}\n")
