"""Building a WorkflowSpec from a parsed file: the `[workflow]` table, then steps or states.

Each `[workflow]` key with rules of its own has a checker in `WORKFLOW_KEYS`;
which driver runs the file follows from its body (`BODIES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.hooks import Hook, parse_hooks
from normalize.keys import check_table, parse_table
from normalize.mcp.config import ServerSpec, parse_servers
from normalize.tables import WORKFLOW_TABLES
from normalize.workflow.check import Checker
from normalize.workflow.schema import BUILTIN_VARS, NAME_RE, ON_INTERRUPT, STATE_VARS
from normalize.workflow.spec import WorkflowSpec
from normalize.workflow.validate import LoadNested, Plugins, Validator


@dataclass
class Source:
    """One workflow file being built: where it is, what it says, who includes it."""

    path: Path
    data: dict[str, Any]
    check: Checker
    stack: tuple[Path, ...]
    label: str | None = None


def _table(source: Source, name: str, value: Any) -> Any:
    """`[workflow.NAME]` checked against its declared keys (`"flat"`: `{strategy = "flat"}`)."""
    table = {"strategy": value} if isinstance(value, str) else value
    return parse_table(WORKFLOW_TABLES[name], table, f"workflow.{name}", source.check.fail)


def _on_interrupt(source: Source, value: Any) -> None:
    source.check.choice(value, ON_INTERRUPT, "workflow.on_interrupt", "on_interrupt")


def _llm(source: Source, llm: Any) -> None:
    """What the declarations cannot say: the provider is registered, the prompt file exists."""
    from normalize.providers.registry import PROVIDERS

    check = source.check
    check.choice(llm.get("provider"), tuple(sorted(PROVIDERS)), "workflow.llm.provider",
                 "provider")
    if "system_prompt_file" in llm:
        if not (source.path.parent / llm["system_prompt_file"]).is_file():
            raise check.fail("workflow.llm.system_prompt_file",
                             f"system_prompt_file {llm['system_prompt_file']!r} not found")


def _driver(source: Source, driver: Any) -> None:
    from normalize.contract.driver import DRIVERS

    if driver not in DRIVERS:
        raise source.check.fail("workflow.driver", f"unknown driver {driver!r} "
                                                   f"(known: {', '.join(DRIVERS.names())})")


def _vars(source: Source, variables: Any) -> None:
    for key in variables:
        if not NAME_RE.fullmatch(key):
            raise source.check.fail(f"workflow.vars.{key}", f"invalid variable name {key!r}")
        if key in BUILTIN_VARS:
            raise source.check.fail(f"workflow.vars.{key}",
                                    f"{{{key}}} is built in; pick another name")


def _mcp(source: Source, servers: Any) -> tuple[ServerSpec, ...]:
    for index, table in enumerate(servers):  # keys and types, as `ServerSpec` declares them
        check_table(ServerSpec, table, f"workflow.mcp.{index}", source.check.fail)

    def fail(index: int, key: str, message: str) -> ConfigError:
        return source.check.fail(f"workflow.mcp.{index}.{key}", message)

    return tuple(parse_servers(servers, str(source.path), fail))


def _output_schema(source: Source, value: Any) -> None:
    from normalize.errors import UsageError
    from normalize.structured import load_contract, schema_beside

    try:
        load_contract(schema_beside(source.path, str(value)), flag="output_schema")
    except UsageError as exc:
        raise source.check.fail("workflow.output_schema", str(exc)) from None


def _output_retries(source: Source, value: Any) -> None:
    from normalize.structured import MAX_RETRIES

    if not 0 <= value <= MAX_RETRIES:
        raise source.check.fail("workflow.output_retries",
                                f"output_retries = {value}: must be from 0 to {MAX_RETRIES}")


def _workspace(source: Source, value: Any) -> None:
    if not str(value).startswith(("dir:", "clone:", "copy")):
        raise source.check.fail("workflow.workspace", f"workspace {value!r} must be dir:PATH, "
                                "clone:REPO or copy (a batch item's)")


def _on_item_error(source: Source, value: Any) -> None:
    source.check.choice(value, ("continue", "stop"), "workflow.on_item_error", "on_item_error")


def _memory_top_k(source: Source, value: Any) -> None:
    from normalize.memory.settings import MAX_TOP_K

    if not 0 <= value <= MAX_TOP_K:
        raise source.check.fail("workflow.memory_top_k",
                                f"memory_top_k = {value}: must be from 0 (off) to {MAX_TOP_K}")


def _memory(source: Source, value: Any) -> None:
    from normalize.memory.settings import MODES

    source.check.choice(value, MODES, "workflow.memory", "memory")


def _hooks(source: Source, tables: Any) -> tuple[Hook, ...]:
    return parse_hooks(tables, f"{source.path}: workflow")


WORKFLOW_KEYS: dict[str, Callable[[Source, Any], Any]] = {
    "on_interrupt": _on_interrupt,
    "llm": _llm,
    "driver": _driver,
    "vars": _vars,
    "mcp": _mcp,
    "hooks": _hooks,
    "output_schema": _output_schema,
    "output_retries": _output_retries,
    "workspace": _workspace,
    "on_item_error": _on_item_error,
    "memory_top_k": _memory_top_k,
    "memory": _memory,
}
"""`[workflow]` keys with rules beyond their type → their check (run when the key is set),
which gives the key's value as the spec keeps it (or None: the file's value, as it is).

The typed sub-tables (`WORKFLOW_TABLES`) are checked first, against their declarations."""


def _tables(source: Source, wf: Mapping[str, Any]) -> dict[str, Any]:
    """Every `[workflow.NAME]` sub-table as its typed value (`llm` only when given)."""
    return {name: _table(source, name, wf.get(name, {}))
            for name in WORKFLOW_TABLES if name != "llm" or wf.get("llm") is not None}


def _variables(check: Checker, wf: Mapping[str, Any],
               overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The workflow's `vars` with `--var` overrides applied (an unknown one is an error)."""
    variables = dict(wf.get("vars", {}))
    unknown = set(overrides or {}) - set(variables) - {"task", "item"}  # item: a batch's
    if unknown:
        name = sorted(unknown)[0]
        raise ConfigError(f"--var {name}: the workflow {check.path} has no variable {name!r} "
                          f"(it has: {', '.join(sorted(variables)) or 'none'})")
    variables.update(overrides or {})
    return variables


def _steps_table(source: Source, wf: Mapping[str, Any]) -> tuple[Any, str]:
    """The steps (`[[steps]]` or `[[workflow.steps]]`, not both) and their key path."""
    raw, key = wf.get("steps"), "workflow.steps"
    if "steps" in source.data:
        if raw is not None:
            raise source.check.fail("steps", "use either [[steps]] or [[workflow.steps]], "
                                             "not both")
        raw, key = source.data["steps"], "steps"
    if raw is not None and source.data.get("states") is not None:
        raise source.check.fail("states", "a workflow has either steps or states, not both")
    return raw, key


def _body(source: Source, spec: WorkflowSpec, validator: Validator, wf: Mapping[str, Any],
          known: set[str]) -> str:
    """Check the steps or states into `spec`; the driver the body implies."""
    raw_steps, steps_key = _steps_table(source, wf)
    raw_states = source.data.get("states")
    if raw_steps is not None:
        if not raw_steps:
            raise source.check.fail(steps_key, "the workflow's steps are empty")
        spec.steps = validator.steps(raw_steps, steps_key, known)
        return "workflow"
    if raw_states is not None:
        spec.states = validator.states(raw_states, known | set(STATE_VARS))
        return "state_machine"
    if wf.get("llm") is not None:
        return "llm"
    if wf.get("driver") is None:
        raise source.check.fail("workflow", "the workflow has no [[workflow.steps]], no "
                                            "[[states]] and no [workflow.llm]: nothing to run")
    return "workflow"


def build_spec(source: Source, *, overrides: Mapping[str, Any] | None, plugins: Plugins,
               load: LoadNested) -> WorkflowSpec:
    """Check a parsed workflow file and build its spec; ConfigError at the first problem."""
    check = source.check
    check.table(source.data, "root", "")
    wf = dict(source.data.get("workflow", {}))
    check.table(wf, "workflow", "workflow")
    _steps_table(source, wf)
    tables = _tables(source, wf)
    checked = {key: check_key(source, wf[key]) for key, check_key in WORKFLOW_KEYS.items()
               if key in wf}
    variables = _variables(check, wf, overrides)
    spec = WorkflowSpec(
        name=wf.get("name", source.path.stem),
        path=str(source.path) if source.label is None else source.label,
        driver="workflow", description=wf.get("description", ""),
        version=wf.get("version", 1), vars=variables, context=tables["context"],
        cache=tables["cache"], retry=tables["retry"], limits=tables["limits"],
        llm=tables.get("llm"), permissions=tables["permissions"],
        on_interrupt=wf.get("on_interrupt"), mcp=checked.get("mcp", ()),
        hooks=checked.get("hooks", ()),
        output_schema=str(source.path.parent / wf["output_schema"])
        if wf.get("output_schema") else None, output_retries=wf.get("output_retries"),
        workspace=wf.get("workspace", ""), on_item_error=wf.get("on_item_error", "continue"),
        memory_top_k=wf.get("memory_top_k"), memory=wf.get("memory"),
        skills=tuple(wf.get("skills", ())),
    )
    validator = Validator(check, plugins, (*source.stack, source.path.resolve()), load)
    try:
        implied = _body(source, spec, validator, wf, set(variables) | set(BUILTIN_VARS))
    except ConfigError:
        validator.raise_problems()  # the broken steps first, if any made this one
        raise
    validator.raise_problems()
    spec.driver = wf.get("driver") or implied
    spec.includes = validator.includes
    return spec
