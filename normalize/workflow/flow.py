"""Workflows written in Python: `Step`, `Sequence`, `Loop`, `Branch` and `Scope`.

    from normalize import Branch, Loop, Scope, Step, run_flow

    flow = Scope(
        Step("analyze {target} --health", capture="health"),
        Loop(Step("llm-decide fix the failing tests", max_turns=8), Step("test"),
             until="success", max_iterations=3),
        Branch("success", then=Step("done fixed"), otherwise=Step("done still failing")),
        context="task_list", retry="fixed",
    )
    outcome = run_flow(flow, name="fix", vars={"target": "."})

A flow compiles to the TOML of a workflow file (`to_toml`), which the loader
validates into the very `WorkflowSpec` a file produces (`compile_flow`).
Running one is the runner's job (`normalize.runner.run_flow`): the same
driver runs it, with the same events, checkpoints and store, and `normalize
resume` continues it. What TOML cannot say, a flow passes as Python
callables: a condition `(result, variables) -> bool` or a `for_each`
source `(variables) -> iterable`. They are registered at run time under
`py:NAME` (in the `normalize.conditions` and `normalize.sources` groups), so
a task using them resumes only in a process that compiled the flow again.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.execution.scope import Scope, ScopeSettings
from normalize.retry import RetryPolicy
from normalize.task import ActionResult
from normalize.workflow.loader import load_workflow_text
from normalize.workflow.spec import WorkflowSpec

__all__ = [
    "Branch",
    "Loop",
    "Scope",
    "Sequence",
    "Step",
    "compile_flow",
    "register_condition",
    "register_source",
    "to_document",
    "to_toml",
]

PyCondition = Callable[[ActionResult | None, Mapping[str, Any]], bool]
PySource = Callable[[Mapping[str, Any]], Iterable[Any]]
Condition = str | PyCondition
Source = str | list[Any] | tuple[Any, ...] | PySource
RetrySpec = str | Mapping[str, Any] | RetryPolicy

_CONDITIONS: dict[str, PyCondition] = {}
_SOURCES: dict[str, PySource] = {}
_LOCK = threading.Lock()


def _register(table: dict[str, Any], fn: Callable[..., Any], name: str | None) -> str:
    base = re.sub(r"\W+", "_", name or getattr(fn, "__name__", "") or "fn").strip("_") or "fn"
    with _LOCK:
        candidate, n = base, 1
        while candidate in table and table[candidate] is not fn:
            n += 1
            candidate = f"{base}_{n}"
        table[candidate] = fn
    return candidate


def register_condition(fn: PyCondition, name: str | None = None) -> str:
    """Register a Python condition; returns the `py:NAME` a workflow refers to it by."""
    return "py:" + _register(_CONDITIONS, fn, name)


def register_source(fn: PySource, name: str | None = None) -> str:
    """Register a Python `for_each` source; returns its `py:NAME`."""
    return "py:" + _register(_SOURCES, fn, name)


def python_condition(result: ActionResult | None, argument: str,
                     variables: Mapping[str, Any]) -> bool:
    """The `py:NAME` condition plugin: calls the registered callable."""
    fn = _CONDITIONS.get(argument)
    if fn is None:
        raise ConfigError(f"condition py:{argument}: no Python condition of that name is "
                          f"registered in this process",
                          hint="a Python workflow resumes from Python: compile the flow again, "
                               "then resume")
    return bool(fn(result, variables))


def python_source(argument: str, workspace: Path, variables: Mapping[str, Any]) -> list[Any]:
    """The `py:NAME` for_each source plugin: calls the registered callable."""
    del workspace
    fn = _SOURCES.get(argument)
    if fn is None:
        raise ConfigError(f"for_each py:{argument}: no Python source of that name is "
                          f"registered in this process",
                          hint="a Python workflow resumes from Python: compile the flow again, "
                               "then resume")
    return list(fn(variables))


# -- the nodes ---------------------------------------------------------------


@dataclass
class Step:
    """One command (or step kind, or nested workflow file), with a step's options."""

    action: str | None = None
    name: str | None = None
    capture: str | None = None
    transform: str | None = None
    condition: Condition | None = None
    for_each: Source | None = None
    as_: str | None = None
    parallel: bool = False
    max_concurrency: int | None = None
    on_error: str | None = None
    retry: RetrySpec | None = None
    timeout: float | None = None
    prompt: str | None = None
    max_turns: int | None = None
    workflow: str | None = None
    context: str | None = None
    cache: str | None = None
    isolation: str | None = None  # "isolated": each item (or the nested workflow) a sub-task
    merge: str | None = None  # an isolated sub-task's changes: "apply" (default) or "none"


class Sequence:
    """Steps run in order, as one group (optionally over `for_each` items)."""

    def __init__(self, *body: object, name: str | None = None,
                 condition: Condition | None = None, for_each: Source | None = None,
                 as_: str | None = None, on_error: str | None = None) -> None:
        self.body = list(body)
        self.name = name
        self.condition = condition
        self.for_each = for_each
        self.as_ = as_
        self.on_error = on_error


class Loop:
    """Its body, again and again until `until` holds after an iteration, at most
    `max_iterations` times. A failing step ends the iteration early; the loop
    fails (per `on_error`) when the bound is reached first."""

    def __init__(self, *body: object, until: Condition, max_iterations: int = 10,
                 name: str | None = None, on_error: str | None = None) -> None:
        if max_iterations < 1:
            raise ConfigError(f"Loop max_iterations must be at least 1, not {max_iterations}")
        self.body = list(body)
        self.until = until
        self.max_iterations = max_iterations
        self.name = name
        self.on_error = on_error


class Branch:
    """`then` when `condition` holds on the last result, else `otherwise`."""

    def __init__(self, condition: Condition, then: object | list[object],
                 otherwise: object | list[object] | None = None, *,
                 name: str | None = None) -> None:
        self.condition = condition
        self.then = list(then) if isinstance(then, list | tuple) else [then]
        self.otherwise: list[object] = [] if otherwise is None else \
            list(otherwise) if isinstance(otherwise, list | tuple) else [otherwise]
        self.name = name


# -- compiling ---------------------------------------------------------------


@dataclass
class _Compiler:
    """Turns nodes into step tables; collects generated variables."""

    vars: dict[str, Any] = field(default_factory=dict)

    def condition(self, value: Condition | None) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return register_condition(value)

    def source(self, value: Source | None) -> str | None:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list | tuple):
            name = f"_items_{len(self.vars) + 1}"
            self.vars[name] = list(value)
            return name
        return register_source(value)

    def steps(self, nodes: Iterable[object]) -> list[dict[str, Any]]:
        return [self.node(n) for n in nodes]

    def node(self, node: object) -> dict[str, Any]:
        if isinstance(node, str):
            node = Step(node)
        if isinstance(node, Step):
            return self.step(node)
        table: dict[str, Any] = {}
        if isinstance(node, Scope):
            if node.state.notes:
                raise ConfigError("a compiled Scope starts without notes; add them with a "
                                  "`note` step")
            _put(table, name=node.name, **_settings(node.settings))
            table["steps"] = self.steps(node.body)
        elif isinstance(node, Sequence):
            _put(table, name=node.name, condition=self.condition(node.condition),
                 for_each=self.source(node.for_each), on_error=node.on_error)
            if node.for_each is not None and node.as_:
                table["as"] = node.as_
            table["steps"] = self.steps(node.body)
        elif isinstance(node, Loop):
            _put(table, name=node.name, until=self.condition(node.until),
                 max_iterations=node.max_iterations, on_error=node.on_error)
            table["steps"] = self.steps(node.body)
        elif isinstance(node, Branch):
            _put(table, name=node.name, condition=self.condition(node.condition))
            table["steps"] = self.steps(node.then)
            if node.otherwise:
                table["else"] = self.steps(node.otherwise)
        else:
            raise ConfigError(f"not a workflow node: {node!r} (Step, Sequence, Loop, Branch, "
                              f"Scope or a command string)")
        if not table["steps"]:
            label = " ".join(filter(None, [type(node).__name__, table.get("name")]))
            raise ConfigError(f"{label} has no steps")
        return table

    def step(self, step: Step) -> dict[str, Any]:
        table: dict[str, Any] = {}
        retry = ScopeSettings.of(retry=step.retry).retry if step.retry is not None else None
        _put(table, name=step.name, action=step.action, workflow=step.workflow,
             prompt=step.prompt, max_turns=step.max_turns, capture=step.capture,
             transform=step.transform, condition=self.condition(step.condition),
             for_each=self.source(step.for_each), on_error=step.on_error,
             timeout=step.timeout, context=step.context, cache=step.cache, retry=retry,
             max_concurrency=step.max_concurrency, isolation=step.isolation,
             merge=step.merge)
        if step.for_each is not None:
            if step.as_:
                table["as"] = step.as_
            if step.parallel:
                table["parallel"] = True
        elif step.parallel:
            raise ConfigError(f"Step {step.action!r}: parallel needs for_each")
        return table


def _put(table: dict[str, Any], **values: Any) -> None:
    table.update({k: v for k, v in values.items() if v is not None})


def _settings(settings: ScopeSettings) -> dict[str, Any]:
    """A Scope's own settings as step keys (a step's `cache` is a strategy name)."""
    cache = settings.cache
    if cache is not None and set(cache) - {"strategy"}:
        raise ConfigError("a nested scope's cache is a strategy name; options such as "
                          "ttl_seconds belong to the root scope")
    return {"context": settings.context, "cache": None if cache is None else cache["strategy"],
            "retry": settings.retry}


def _root(root: object) -> tuple[ScopeSettings, list[object]]:
    if isinstance(root, Scope):
        return root.settings, root.body
    if isinstance(root, Sequence) and root.condition is None and root.for_each is None:
        return ScopeSettings(), root.body
    if isinstance(root, list | tuple):
        return ScopeSettings(), list(root)
    return ScopeSettings(), [root]


def to_document(root: object, *, name: str = "python", description: str = "",
                vars: Mapping[str, Any] | None = None, limits: Mapping[str, Any] | None = None,
                llm: Mapping[str, Any] | None = None,
                permissions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The flow as the data of a workflow file (`{"workflow": {...}}`)."""
    settings, body = _root(root)
    if isinstance(root, Scope) and root.state.notes:
        raise ConfigError("a compiled Scope starts without notes; add them with a `note` step")
    compiler = _Compiler()
    steps = compiler.steps(body)
    if not steps:
        raise ConfigError("the flow has no steps")
    workflow: dict[str, Any] = {"name": name}
    _put(workflow, description=description or None)
    variables = {**compiler.vars, **(vars or {})}
    if variables:
        workflow["vars"] = variables
    for key in ("context", "cache", "retry"):
        value = getattr(settings, key)
        if value is not None:
            workflow[key] = {"strategy": value} if isinstance(value, str) else dict(value)
    for key, value in (("limits", limits), ("llm", llm), ("permissions", permissions)):
        if value:
            workflow[key] = dict(value)
    workflow["steps"] = steps
    return {"workflow": workflow}


def to_toml(root: object, **options: Any) -> str:
    """The flow as the text of a workflow file."""
    import tomlkit

    return tomlkit.dumps(to_document(root, **options))


def compile_flow(root: object, *, base_dir: Path | str | None = None,
                 overrides: Mapping[str, Any] | None = None, **options: Any) -> WorkflowSpec:
    """Validate the flow exactly as a workflow file is validated; its WorkflowSpec.

    Errors name the line of the generated TOML (`to_toml` shows it) as
    `<python:NAME>:LINE:COL: message`.
    """
    name = options.get("name", "python")
    return load_workflow_text(to_toml(root, **options), label=f"<python:{name}>",
                              base_dir=base_dir, overrides=overrides)
