"""Loading and validating workflow files (TOML, via tomlkit) into a WorkflowSpec.

Every problem is reported before anything runs, as one `FILE:LINE:COL:
message` line naming the key. The accepted format is WORKFLOWS.md's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.workflow.interpolate import variables_in
from normalize.workflow.locate import Locator
from normalize.workflow.schema import (
    BUILTIN_CONDITIONS,
    BUILTIN_VARS,
    DEFAULT_MAX_ITERATIONS,
    NAME_RE,
    ON_ERROR,
    ON_INTERRUPT,
    SCHEMAS,
    STATE_VARS,
    STRATEGIES,
    TRANSFORMS,
    TYPE_NAMES,
    VAR_TOKEN_RE,
)
from normalize.workflow.spec import StateSpec, StepSpec, TransitionSpec, WorkflowSpec


class _Checker:
    """Validation state for one file: its source positions and known names."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.locator = Locator(source)

    def fail(self, key_path: str, message: str) -> ConfigError:
        pos = self.locator.find(key_path)
        line, col = pos if pos else (1, 1)
        return ConfigError(message, file=str(self.path), line=line, col=col)

    def line_of(self, key_path: str) -> int:
        pos = self.locator.find(key_path)
        return pos[0] if pos else 0

    def table(self, data: Mapping[str, Any], schema: str, where: str) -> None:
        allowed = SCHEMAS[schema]
        for key, value in data.items():
            path = f"{where}.{key}" if where else key
            check = allowed.get(key)
            if check is None:
                near = _closest(key, allowed)
                hint = f"; did you mean {near!r}?" if near else ""
                raise self.fail(path, f"unknown key {key!r} in [{where or 'top level'}]{hint}")
            if not check(value):
                raise self.fail(path, f"{key!r} must be {TYPE_NAMES[check]}, "
                                      f"not {_type_name(value)}")

    def choice(self, value: str | None, choices: tuple[str, ...], path: str, what: str) -> None:
        if value is not None and value not in choices:
            raise self.fail(path, f"unknown {what} {value!r} (choose from {', '.join(choices)})")

    def positive(self, table: Mapping[str, Any], key: str, where: str) -> None:
        value = table.get(key)
        if value is not None and value <= 0:
            raise self.fail(f"{where}.{key}", f"{key!r} must be positive, not {value}")

    def retry_values(self, table: Mapping[str, Any], where: str) -> None:
        """A retry table's numbers make sense (at least one attempt, no negative delay)."""
        self.positive(table, "max_attempts", where)
        for key in ("base_delay", "max_delay"):
            if table.get(key, 0) < 0:
                raise self.fail(f"{where}.{key}", f"{key!r} must not be negative")


def _closest(key: str, allowed: Mapping[str, Any]) -> str | None:
    import difflib

    found = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.75)
    return found[0] if found else None


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _plain(value: Any) -> Any:
    """tomlkit containers → plain dicts, lists and scalars."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if unwrap is not None else value


def parse_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The file's data and text; a syntax error is `FILE:LINE:COL: message`."""
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such workflow file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a workflow file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_toml_text(source, str(path)), source


def parse_toml_text(source: str, label: str) -> dict[str, Any]:
    """TOML text as plain data; a syntax error is `LABEL:LINE:COL: message`."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        doc = tomlkit.parse(source)
    except ParseError as exc:
        text = re.sub(r"\s+at line \d+ col \d+$", "", str(exc))
        raise ConfigError(f"invalid TOML: {text}", file=label, line=exc.line,
                          col=exc.col) from None
    data = _plain(doc)
    assert isinstance(data, dict)
    return data


ConditionCheck = Callable[[str], bool]


def _registered(group: str) -> ConditionCheck:
    """Whether a name is registered in a plugin group (imported lazily)."""

    def check(name: str) -> bool:
        if group == "conditions":
            from normalize.workflow.conditions import is_condition

            return is_condition(name)
        if group == "sources":
            from normalize.workflow.sources import SOURCES

            if name not in SOURCES:
                return False
            try:
                SOURCES.get(name)
            except KeyError:
                return False
            return True
        from normalize.steps import is_step_kind

        return is_step_kind(name)

    return check


def broken_plugin(group: str, name: str) -> str | None:
    """Why the plugin `name` of `group` (conditions, sources, steps) failed to load, if it did."""
    from normalize.plugins import PluginGroup
    from normalize.steps import STEPS
    from normalize.workflow.conditions import CONDITIONS
    from normalize.workflow.sources import SOURCES

    groups: dict[str, PluginGroup[Any]] = {"conditions": CONDITIONS, "sources": SOURCES,
                                           "steps": STEPS}
    registry = groups[group]
    if name not in registry:
        return None
    try:
        registry.get(name)
    except KeyError:
        found = [w for w in registry.warnings if f"plugin {name!r}" in w]
        return found[0].split(": ", 1)[-1] if found else f"plugin {name!r} failed to load"
    return None


def load_workflow(
    path: Path | str,
    *,
    overrides: Mapping[str, Any] | None = None,
    is_condition: ConditionCheck | None = None,
    is_step_kind: ConditionCheck | None = None,
    is_source: ConditionCheck | None = None,
    _stack: tuple[Path, ...] = (),
) -> WorkflowSpec:
    """Parse and validate a workflow file; raise ConfigError at the first problem.

    Plugin checks default to the registries (`normalize.conditions`,
    `normalize.steps`, `normalize.sources`).
    """
    path = Path(path)
    data, source = parse_toml(path)
    return _build(path, data, source, overrides=overrides,
                  plugins=_Plugins(is_condition, is_step_kind, is_source), stack=_stack)


def load_workflow_text(
    source: str,
    *,
    label: str = "<workflow>",
    base_dir: Path | str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> WorkflowSpec:
    """Validate workflow TOML given as text (errors say `LABEL:LINE:COL`).

    Nested `workflow = "..."` files are found relative to `base_dir` (default:
    the current directory).
    """
    path = Path(base_dir or ".") / label
    data = parse_toml_text(source, label)
    return _build(path, data, source, overrides=overrides, plugins=_Plugins(None, None, None),
                  stack=(), label=label)


class _Plugins:
    """What the validator asks about plugin names."""

    def __init__(self, is_condition: ConditionCheck | None, is_step_kind: ConditionCheck | None,
                 is_source: ConditionCheck | None) -> None:
        self.is_condition = is_condition or _registered("conditions")
        self.is_step_kind = is_step_kind or _registered("steps")
        self.is_source = is_source or _registered("sources")


def _build(path: Path, data: dict[str, Any], source: str, *,
           overrides: Mapping[str, Any] | None, plugins: _Plugins,
           stack: tuple[Path, ...], label: str | None = None) -> WorkflowSpec:
    check = _Checker(Path(label) if label else path, source)
    check.table(data, "root", "")
    wf = dict(data.get("workflow", {}))
    check.table(wf, "workflow", "workflow")
    steps_key = "workflow.steps"
    raw_steps = wf.get("steps")
    if "steps" in data:
        if raw_steps is not None:
            raise check.fail("steps", "use either [[steps]] or [[workflow.steps]], not both")
        raw_steps, steps_key = data["steps"], "steps"
    raw_states = data.get("states")
    if raw_steps is not None and raw_states is not None:
        raise check.fail("states", "a workflow has either steps or states, not both")

    tables: dict[str, Any] = {}
    for name in ("context", "cache", "retry"):
        value = wf.get(name, {})
        if isinstance(value, str):
            value = {"strategy": value}
        check.table(value, name, f"workflow.{name}")
        check.choice(value.get("strategy"), STRATEGIES[name], f"workflow.{name}.strategy",
                     f"{name} strategy")
        tables[name] = value
    check.retry_values(tables["retry"], "workflow.retry")
    for name in ("limits", "llm", "permissions"):
        if name in wf:
            check.table(wf[name], name, f"workflow.{name}")
    for key, value in wf.get("limits", {}).items():
        if value <= 0:
            raise check.fail(f"workflow.limits.{key}", f"{key} must be positive, not {value}")
    perms = wf.get("permissions", {})
    check.choice(perms.get("mode"), ("ask", "auto", "yes", "never"),
                 "workflow.permissions.mode", "approval mode")
    check.choice(wf.get("on_interrupt"), ON_INTERRUPT, "workflow.on_interrupt", "on_interrupt")
    llm = wf.get("llm")
    if llm is not None:
        from normalize.providers.registry import PROVIDERS

        check.choice(llm.get("provider"), tuple(sorted(PROVIDERS)), "workflow.llm.provider",
                     "provider")
        if "system_prompt_file" in llm:
            prompt_file = path.parent / llm["system_prompt_file"]
            if not prompt_file.is_file():
                raise check.fail("workflow.llm.system_prompt_file",
                                 f"system_prompt_file {llm['system_prompt_file']!r} not found")
    driver = wf.get("driver")
    if driver is not None:
        from normalize.drivers.base import DRIVERS

        if driver not in DRIVERS:
            raise check.fail("workflow.driver", f"unknown driver {driver!r} "
                                                f"(known: {', '.join(DRIVERS.names())})")

    variables = dict(wf.get("vars", {}))
    for key in variables:
        if not NAME_RE.fullmatch(key):
            raise check.fail(f"workflow.vars.{key}", f"invalid variable name {key!r}")
        if key in BUILTIN_VARS:
            raise check.fail(f"workflow.vars.{key}", f"{{{key}}} is built in; pick another name")
    unknown_overrides = set(overrides or {}) - set(variables) - {"task"}
    if unknown_overrides:
        name = sorted(unknown_overrides)[0]
        raise ConfigError(f"--var {name}: the workflow {check.path} has no variable {name!r} "
                          f"(it has: {', '.join(sorted(variables)) or 'none'})")
    variables.update(overrides or {})

    known = set(variables) | set(BUILTIN_VARS)
    spec = WorkflowSpec(
        name=wf.get("name", path.stem), path=str(path) if label is None else label,
        driver=driver or "workflow",
        description=wf.get("description", ""), version=wf.get("version", 1),
        vars=variables, context=tables["context"], cache=tables["cache"],
        retry=tables["retry"], limits=dict(wf.get("limits", {})), llm=llm,
        permissions=dict(perms), on_interrupt=wf.get("on_interrupt"),
    )
    validator = _Validator(check, plugins, (*stack, path.resolve()))
    if raw_steps is not None:
        if not raw_steps:
            raise check.fail(steps_key, "the workflow's steps are empty")
        spec.steps = validator.steps(raw_steps, steps_key, known)
        spec.driver = driver or "workflow"
    elif raw_states is not None:
        spec.states = validator.states(raw_states, known | set(STATE_VARS))
        spec.driver = driver or "state_machine"
    elif llm is not None:
        spec.driver = driver or "llm"
    elif driver is None:
        raise check.fail("workflow", "the workflow has no [[workflow.steps]], no [[states]] "
                                     "and no [workflow.llm]: nothing to run")
    spec.includes = validator.includes
    return spec


class _Validator:
    """Checks steps and states, and loads nested workflow files."""

    def __init__(self, check: _Checker, plugins: _Plugins, stack: tuple[Path, ...]) -> None:
        self.check = check
        self.plugins = plugins
        self.stack = stack
        self.includes: dict[str, Any] = {}

    def text(self, value: str | None, where: str, known: set[str]) -> None:
        if value is None:
            return
        for name in variables_in(value):
            if name.split(".")[0] not in known:
                raise self.check.fail(where, f"unknown variable {{{name}}} (known: "
                                             f"{', '.join(sorted(known)) or 'none'})")

    def action(self, value: str | None, where: str, known: set[str]) -> None:
        if value is None:
            return
        self.text(value, where, known)
        first = value.split(None, 1)[0] if value.strip() else ""
        if not first:
            raise self.check.fail(where, "empty action")
        if self.plugins.is_step_kind(first):
            return
        from normalize.errors import UsageError
        from normalize.intents import parse_command, verb_for
        from normalize.verbs import all_words

        if verb_for(first) is None:
            from normalize.steps import STEPS

            broken = broken_plugin("steps", first)
            if broken:
                raise self.check.fail(where, f"step kind {first!r}: {broken}")

            near = _closest(first, dict.fromkeys([*all_words(), *STEPS.names()]))
            hint = f"; did you mean {near!r}?" if near else ""
            raise self.check.fail(where, f"unknown command or step kind {first!r} in "
                                         f"action {value!r}{hint}")
        try:
            parse_command(VAR_TOKEN_RE.sub("x", value))
        except UsageError as exc:
            raise self.check.fail(where, f"invalid action: {exc}") from None

    def condition(self, value: str | None, where: str, *, in_state: bool = False) -> None:
        if value is None:
            return
        if value == "llm" and not in_state:
            raise self.check.fail(where, "the `llm` condition picks among a state's "
                                         "transitions; it only works in [[states.transitions]]")
        if value in BUILTIN_CONDITIONS or self.plugins.is_condition(value):
            return
        kind, sep, arg = value.partition(":")
        if sep and kind in ("contains", "not_contains") and arg:
            return
        if sep and kind == "matches":
            try:
                re.compile(arg)
            except re.error as exc:
                raise self.check.fail(where, f"invalid regex in {value!r}: {exc}") from None
            return
        if sep and kind in ("exit_code", "visits"):
            if not re.fullmatch(r"-?\d+", arg):
                raise self.check.fail(where, f"{kind} needs an integer, not {arg!r}")
            return
        if sep and kind == "var" and arg:
            return
        broken = broken_plugin("conditions", kind)
        if broken:
            raise self.check.fail(where, f"condition {value!r}: {broken}")
        raise self.check.fail(where, f"unknown condition {value!r} (success, failure, always, "
                                     f"contains:TEXT, matches:REGEX, exit_code:N, llm, or a "
                                     f"plugin)")

    def source(self, value: str, where: str, known: set[str]) -> None:
        """A `for_each` source: a list variable, files:GLOB, lines:TEXT or a plugin."""
        self.text(value, where, known)
        kind, sep, arg = value.partition(":")
        if sep and NAME_RE.fullmatch(kind.replace("-", "_")):
            if kind not in ("files", "lines") and not self.plugins.is_source(kind):
                broken = broken_plugin("sources", kind)
                if broken:
                    raise self.check.fail(where, f"for_each source {kind!r}: {broken}")
                raise self.check.fail(where, f"unknown for_each source {kind!r} in {value!r} "
                                             f"(files:GLOB, lines:TEXT, a list variable, or a "
                                             f"source plugin)")
            if not arg.strip():
                raise self.check.fail(where, f"for_each source {kind!r} needs an argument "
                                             f"after the colon")
            return
        name = value.strip()
        if name.startswith("{") and name.endswith("}"):
            name = name[1:-1]
        if name.split(".")[0] not in known:
            raise self.check.fail(where, f"for_each needs a list variable, files:GLOB, "
                                         f"lines:TEXT or a source plugin, not {value!r}")

    def transform(self, value: str | None, where: str, known: set[str]) -> None:
        if value is None:
            return
        kind, sep, arg = value.partition(":")
        if kind not in TRANSFORMS or (kind in ("lines", "strip") and sep):
            raise self.check.fail(where, f"unknown transform {value!r} (json:FIELD, "
                                         f"regex:PATTERN, lines, strip, format:TEXT)")
        if kind == "format":
            self.text(arg, where, known | {"result"})
        if kind == "regex":
            try:
                re.compile(arg)
            except re.error as exc:
                raise self.check.fail(where, f"invalid regex in {value!r}: {exc}") from None

    def nested(self, value: str | None, where: str) -> None:
        if value is None:
            return
        base = self.stack[-1].parent
        target = (base / value).resolve()
        if target in self.stack:
            chain = " → ".join(p.name for p in (*self.stack, target))
            raise self.check.fail(where, f"nested workflows form a cycle: {chain}")
        if not target.is_file():
            raise self.check.fail(where, f"nested workflow {value!r} not found")
        spec = load_workflow(target, is_condition=self.plugins.is_condition,
                             is_step_kind=self.plugins.is_step_kind,
                             is_source=self.plugins.is_source, _stack=self.stack)
        self.includes[value] = spec.to_dict()

    def retry(self, value: Any, where: str) -> dict[str, Any] | None:
        if value is None:
            return None
        table = {"strategy": value} if isinstance(value, str) else dict(value)
        self.check.table(table, "retry", where)
        self.check.choice(table.get("strategy"), STRATEGIES["retry"], f"{where}.strategy",
                          "retry strategy")
        self.check.retry_values(table, where)
        return table

    def steps(self, raw: list[dict[str, Any]], where: str, known: set[str]) -> list[StepSpec]:
        """Check a list of steps; adds the variables they capture to `known`."""
        out: list[StepSpec] = []
        for index, item in enumerate(raw):
            out.append(self.step(item, f"{where}.{index}", index, known))
        return out

    def step(self, item: dict[str, Any], here: str, index: int, known: set[str]) -> StepSpec:
        check = self.check
        check.table(item, "step", here)
        name = item.get("name", f"step {index + 1}")
        forms = [k for k in ("action", "steps", "workflow") if item.get(k) is not None]
        if not forms:
            raise check.fail(here, f"step {name!r} needs an `action`, nested `steps` "
                                   f"or a `workflow`")
        if len(forms) > 1:
            raise check.fail(f"{here}.{forms[1]}", f"step {name!r} has both `{forms[0]}` and "
                                                   f"`{forms[1]}`; give it one")
        action, nested = item.get("action"), item.get("steps")
        local = set(known)
        as_name = item.get("as", "item")
        if item.get("for_each") is not None:
            self.source(item["for_each"], f"{here}.for_each", known)
            if not NAME_RE.fullmatch(as_name):
                raise check.fail(f"{here}.as", f"invalid variable name {as_name!r} in `as`")
            local.add(as_name)
        else:
            for key in ("as", "parallel", "max_concurrency"):
                if key in item:
                    raise check.fail(f"{here}.{key}", f"`{key}` needs `for_each`")
        if item.get("parallel") and nested:
            raise check.fail(f"{here}.parallel", "`parallel` fans out one `action` over the "
                                                 "items; nested steps run in order")
        if item.get("parallel") and item.get("workflow"):
            raise check.fail(f"{here}.parallel", "`parallel` fans out one `action`, not a "
                                                 "nested workflow")
        check.positive(item, "max_concurrency", here)
        check.positive(item, "timeout", here)
        check.positive(item, "max_turns", here)
        if "max_iterations" in item and "until" not in item:
            raise check.fail(f"{here}.max_iterations", "`max_iterations` bounds an `until` "
                                                       "loop; add `until`")
        check.positive(item, "max_iterations", here)
        if "until" in item and item.get("for_each") is not None:
            raise check.fail(f"{here}.until", "a step loops over `for_each` or `until`, "
                                              "not both")
        if "else" in item and "condition" not in item:
            raise check.fail(f"{here}.else", "`else` runs when `condition` does not hold; "
                                             "add `condition`")
        for key in ("on_error", "on_interrupt"):
            choices = ON_ERROR if key == "on_error" else ON_INTERRUPT
            check.choice(item.get(key), choices, f"{here}.{key}", key)
        for key in ("context", "cache"):
            check.choice(item.get(key), STRATEGIES[key], f"{here}.{key}", f"{key} strategy")
        self.text(item.get("condition"), f"{here}.condition", local)
        self.condition(item.get("condition"), f"{here}.condition")
        self.action(action, f"{here}.action", local)
        self.text(item.get("prompt"), f"{here}.prompt", local)
        self.nested(item.get("workflow"), f"{here}.workflow")
        self.transform(item.get("transform"), f"{here}.transform", local)
        if "transform" in item and "capture" not in item:
            raise check.fail(f"{here}.transform", "`transform` shapes a captured value; "
                                                  "add `capture`")
        capture = item.get("capture")
        if capture is not None and not NAME_RE.fullmatch(capture):
            raise check.fail(f"{here}.capture", f"invalid variable name {capture!r} in "
                                                f"`capture`")
        if capture in BUILTIN_VARS:
            raise check.fail(f"{here}.capture", f"{{{capture}}} is built in; capture into "
                                                f"another name")
        inner = set(local)
        children = self.steps(nested, f"{here}.steps", inner) if nested else []
        if capture:
            inner.add(capture)
        self.text(item.get("until"), f"{here}.until", inner)
        self.condition(item.get("until"), f"{here}.until")
        otherwise_known = set(known)
        otherwise = self.steps(item["else"], f"{here}.else", otherwise_known) \
            if item.get("else") else []
        retry = self.retry(item.get("retry"), f"{here}.retry")
        step = StepSpec(
            name=name, action=action, capture=capture,
            transform=item.get("transform"), on_error=item.get("on_error", "fail"),
            on_interrupt=item.get("on_interrupt"), condition=item.get("condition"),
            for_each=item.get("for_each"), as_=as_name,
            parallel=item.get("parallel", False),
            max_concurrency=item.get("max_concurrency", 4), steps=children,
            context=item.get("context"), cache=item.get("cache"), retry=retry,
            timeout=item.get("timeout"), workflow=item.get("workflow"),
            prompt=item.get("prompt"), max_turns=item.get("max_turns"),
            until=item.get("until"),
            max_iterations=item.get("max_iterations",
                                    DEFAULT_MAX_ITERATIONS if "until" in item else None),
            otherwise=otherwise, line=check.line_of(here),
        )
        # what the step (or its nested steps, or its `else`) captures is known after it
        known |= (inner - local) | (otherwise_known - known)
        return step

    def states(self, raw: list[dict[str, Any]], known: set[str]) -> list[StateSpec]:
        out: list[StateSpec] = []
        names: dict[str, int] = {}
        known = set(known)
        for index, item in enumerate(raw):
            here = f"states.{index}"
            self.check.table(item, "state", here)
            if "name" not in item:
                raise self.check.fail(here, "state needs a `name`")
            if item["name"] in names:
                raise self.check.fail(f"{here}.name", f"duplicate state {item['name']!r}")
            names[item["name"]] = index
            capture = item.get("capture")
            if capture is not None:
                if not NAME_RE.fullmatch(capture) or capture in BUILTIN_VARS:
                    raise self.check.fail(f"{here}.capture", f"invalid variable name "
                                                             f"{capture!r} in `capture`")
                known.add(capture)
        for index, item in enumerate(raw):
            here = f"states.{index}"
            if item.get("action") is not None and item.get("workflow") is not None:
                raise self.check.fail(f"{here}.workflow", f"state {item['name']!r} has both "
                                                          f"`action` and `workflow`; give it one")
            for key in ("action", "on_entry", "on_exit"):
                self.action(item.get(key), f"{here}.{key}", known)
            self.check.choice(item.get("on_interrupt"), ON_INTERRUPT, f"{here}.on_interrupt",
                              "on_interrupt")
            self.check.positive(item, "timeout", here)
            self.check.positive(item, "max_turns", here)
            self.text(item.get("prompt"), f"{here}.prompt", known)
            self.nested(item.get("workflow"), f"{here}.workflow")
            transitions: list[TransitionSpec] = []
            for t_index, t in enumerate(item.get("transitions", [])):
                t_here = f"{here}.transitions.{t_index}"
                self.check.table(t, "transition", t_here)
                if "next" not in t:
                    raise self.check.fail(t_here, "transition needs `next`")
                if t["next"] not in names:
                    raise self.check.fail(f"{t_here}.next", f"unknown state {t['next']!r} in "
                                                            f"`next` (states: "
                                                            f"{', '.join(names)})")
                self.text(t.get("condition"), f"{t_here}.condition", known)
                self.condition(t.get("condition"), f"{t_here}.condition", in_state=True)
                transitions.append(TransitionSpec(next=t["next"],
                                                  condition=t.get("condition", "always"),
                                                  line=self.check.line_of(t_here)))
            terminal = item.get("terminal", False)
            self.check.choice(item.get("status"), ("done", "failed", "stuck"), f"{here}.status",
                              "terminal status")
            if ("status" in item or "summary" in item) and not terminal:
                key = "status" if "status" in item else "summary"
                raise self.check.fail(f"{here}.{key}", f"`{key}` applies to terminal states only")
            if terminal:
                for key in ("action", "workflow", "on_entry", "on_exit", "capture"):
                    if key in item:
                        raise self.check.fail(f"{here}.{key}", f"terminal state "
                                                               f"{item['name']!r} runs nothing; "
                                                               f"drop `{key}`")
            self.text(item.get("summary"), f"{here}.summary", known)
            if not terminal and not transitions:
                raise self.check.fail(here, f"state {item['name']!r} is not terminal and has "
                                            f"no transitions")
            if terminal and transitions:
                raise self.check.fail(f"{here}.terminal", f"terminal state {item['name']!r} "
                                                          f"cannot have transitions")
            out.append(StateSpec(
                name=item["name"], action=item.get("action"), transitions=transitions,
                terminal=terminal, status=item.get("status", "done"),
                summary=item.get("summary"),
                on_entry=item.get("on_entry"), on_exit=item.get("on_exit"),
                capture=item.get("capture"), timeout=item.get("timeout"),
                on_interrupt=item.get("on_interrupt"), workflow=item.get("workflow"),
                prompt=item.get("prompt"), max_turns=item.get("max_turns"),
                line=self.check.line_of(here),
            ))
        self._reachability(out)
        return out

    def _reachability(self, states: list[StateSpec]) -> None:
        if not states:
            raise self.check.fail("states", "[[states]] is empty")
        terminals = [s for s in states if s.terminal]
        if not terminals:
            raise self.check.fail("states.0", "no terminal state: the machine can never end")
        by_name = {s.name: s for s in states}
        seen = {states[0].name}
        todo = [states[0].name]
        while todo:
            for t in by_name[todo.pop()].transitions:
                if t.next not in seen:
                    seen.add(t.next)
                    todo.append(t.next)
        for index, state in enumerate(states):
            if state.terminal and state.name not in seen:
                raise self.check.fail(f"states.{index}", f"terminal state {state.name!r} is "
                                                         f"unreachable from {states[0].name!r}")
