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
from normalize.workflow.spec import StateSpec, StepSpec, TransitionSpec, WorkflowSpec

STRATEGIES = {
    "context": ("task_tree", "task_list", "flat", "conversation", "none"),
    "cache": ("none", "memory", "persistent"),
    "retry": ("none", "fixed", "exponential"),
}
ON_ERROR = ("fail", "skip", "retry", "continue")
ON_INTERRUPT = ("rerun", "fail", "ask")
BUILTIN_CONDITIONS = ("success", "failure", "always", "llm")
BUILTIN_VARS = ("task", "workspace")
_VAR_TOKEN = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.-]*\}")

Checker = Callable[[Any], bool]
_str: Checker = lambda v: isinstance(v, str)  # noqa: E731
_bool: Checker = lambda v: isinstance(v, bool)  # noqa: E731
_int: Checker = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
_num: Checker = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
_table: Checker = lambda v: isinstance(v, dict)  # noqa: E731
_strs: Checker = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
_str_or_table: Checker = lambda v: isinstance(v, str | dict)  # noqa: E731
_tables: Checker = lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v)  # noqa: E731

TYPE_NAMES = {_str: "a string", _bool: "a boolean", _int: "an integer", _num: "a number",
              _table: "a table", _strs: "a list of strings", _str_or_table: "a string or a table",
              _tables: "an array of tables"}

SCHEMAS: dict[str, dict[str, Checker]] = {
    "root": {"workflow": _table, "steps": _tables, "states": _tables},
    "workflow": {"name": _str, "description": _str, "version": _int, "vars": _table,
                 "context": _str_or_table, "cache": _str_or_table, "retry": _str_or_table,
                 "limits": _table, "llm": _table, "permissions": _table, "steps": _tables,
                 "driver": _str, "on_interrupt": _str},
    "context": {"strategy": _str, "max_results": _int, "max_history": _int,
                "compact_after_chars": _int},
    "cache": {"strategy": _str, "preview_length": _int, "preview_lines": _int,
              "ttl_seconds": _num, "max_bytes": _int},
    "retry": {"strategy": _str, "max_attempts": _int, "base_delay": _num, "max_delay": _num,
              "jitter": _bool},
    "limits": {"max_turns": _int, "max_tokens": _int, "max_cost_usd": _num,
               "timeout_seconds": _num},
    "llm": {"provider": _str, "model": _str, "fallback": _strs, "system_prompt": _str,
            "system_prompt_file": _str, "max_actions": _int, "allow_parallel": _bool,
            "thinking": _bool, "base_url": _str, "max_tokens": _int, "temperature": _num,
            "prices": _table},
    "permissions": {"mode": _str, "allow": _strs, "deny": _strs, "allow_shell": _bool},
    "step": {"name": _str, "action": _str, "capture": _str, "transform": _str, "on_error": _str,
             "on_interrupt": _str, "condition": _str, "for_each": _str, "as": _str,
             "parallel": _bool, "max_concurrency": _int, "steps": _tables, "context": _str,
             "cache": _str, "retry": _str_or_table, "timeout": _num, "workflow": _str,
             "prompt": _str, "max_turns": _int},
    "state": {"name": _str, "action": _str, "transitions": _tables, "terminal": _bool,
              "status": _str, "summary": _str,
              "on_entry": _str, "on_exit": _str, "capture": _str, "timeout": _num,
              "on_interrupt": _str, "workflow": _str, "prompt": _str, "max_turns": _int},
    "transition": {"condition": _str, "next": _str},
}


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
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such workflow file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        doc = tomlkit.parse(source)
    except ParseError as exc:
        text = re.sub(r"\s+at line \d+ col \d+$", "", str(exc))
        raise ConfigError(f"invalid TOML: {text}", file=str(path), line=exc.line,
                          col=exc.col) from None
    data = _plain(doc)
    assert isinstance(data, dict)
    return data, source


ConditionCheck = Callable[[str], bool]


def _never(name: str) -> bool:
    del name
    return False


def load_workflow(
    path: Path | str,
    *,
    overrides: Mapping[str, Any] | None = None,
    is_condition: ConditionCheck | None = None,
    is_step_kind: ConditionCheck | None = None,
    _stack: tuple[Path, ...] = (),
) -> WorkflowSpec:
    """Parse and validate a workflow file; raise ConfigError at the first problem."""
    path = Path(path)
    data, source = parse_toml(path)
    check = _Checker(path, source)
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
    for name in ("limits", "llm", "permissions"):
        if name in wf:
            check.table(wf[name], name, f"workflow.{name}")
    perms = wf.get("permissions", {})
    check.choice(perms.get("mode"), ("ask", "auto", "yes", "never"),
                 "workflow.permissions.mode", "approval mode")
    check.choice(wf.get("on_interrupt"), ON_INTERRUPT, "workflow.on_interrupt", "on_interrupt")
    llm = wf.get("llm")
    if llm is not None:
        check.choice(llm.get("provider"), ("anthropic", "openai", "ollama", "scripted", "replay"),
                     "workflow.llm.provider", "provider")
        if "system_prompt_file" in llm:
            prompt_file = path.parent / llm["system_prompt_file"]
            if not prompt_file.is_file():
                raise check.fail("workflow.llm.system_prompt_file",
                                 f"system_prompt_file {llm['system_prompt_file']!r} not found")

    variables = dict(wf.get("vars", {}))
    for key in variables:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise check.fail(f"workflow.vars.{key}", f"invalid variable name {key!r}")
    unknown_overrides = set(overrides or {}) - set(variables) - set(BUILTIN_VARS)
    if unknown_overrides:
        name = sorted(unknown_overrides)[0]
        raise ConfigError(f"{path}: --var {name}: the workflow has no variable {name!r} "
                          f"(it has: {', '.join(sorted(variables)) or 'none'})")
    variables.update(overrides or {})

    conditions = is_condition or _never
    step_kinds = is_step_kind or _never
    known = set(variables) | set(BUILTIN_VARS)
    driver = wf.get("driver")
    spec = WorkflowSpec(
        name=wf.get("name", path.stem), path=str(path), driver=driver or "workflow",
        description=wf.get("description", ""), version=wf.get("version", 1),
        vars=variables, context=tables["context"], cache=tables["cache"],
        retry=tables["retry"], limits=dict(wf.get("limits", {})), llm=llm,
        permissions=dict(perms), on_interrupt=wf.get("on_interrupt"),
    )
    validator = _Validator(check, conditions, step_kinds, (*_stack, path.resolve()))
    if raw_steps is not None:
        spec.steps = validator.steps(raw_steps, steps_key, known)
        spec.driver = driver or "workflow"
    elif raw_states is not None:
        spec.states = validator.states(raw_states, known)
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

    def __init__(self, check: _Checker, is_condition: ConditionCheck,
                 is_step_kind: ConditionCheck, stack: tuple[Path, ...]) -> None:
        self.check = check
        self.is_condition = is_condition
        self.is_step_kind = is_step_kind
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
        if self.is_step_kind(first):
            return
        from normalize.errors import UsageError
        from normalize.intents import parse_command, verb_for

        if verb_for(first) is None:
            raise self.check.fail(where, f"unknown command or step kind {first!r} in "
                                         f"action {value!r}")
        try:
            parse_command(_VAR_TOKEN.sub("x", value))
        except UsageError as exc:
            raise self.check.fail(where, f"invalid action: {exc}") from None

    def condition(self, value: str | None, where: str) -> None:
        if value is None or value in BUILTIN_CONDITIONS or self.is_condition(value):
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
        if sep and kind == "exit_code":
            if not re.fullmatch(r"-?\d+", arg):
                raise self.check.fail(where, f"exit_code needs an integer, not {arg!r}")
            return
        if sep and kind == "var":
            return
        raise self.check.fail(where, f"unknown condition {value!r} (success, failure, always, "
                                     f"contains:TEXT, matches:REGEX, exit_code:N, llm, or a "
                                     f"plugin)")

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
        spec = load_workflow(target, is_condition=self.is_condition,
                             is_step_kind=self.is_step_kind, _stack=self.stack)
        self.includes[value] = spec.to_dict()

    def retry(self, value: Any, where: str) -> dict[str, Any] | None:
        if value is None:
            return None
        table = {"strategy": value} if isinstance(value, str) else dict(value)
        self.check.table(table, "retry", where)
        self.check.choice(table.get("strategy"), STRATEGIES["retry"], f"{where}.strategy",
                          "retry strategy")
        return table

    def steps(self, raw: list[dict[str, Any]], where: str, known: set[str]) -> list[StepSpec]:
        out: list[StepSpec] = []
        known = set(known)
        for index, item in enumerate(raw):
            here = f"{where}.{index}"
            self.check.table(item, "step", here)
            name = item.get("name", f"step {index + 1}")
            action, nested = item.get("action"), item.get("steps")
            if action is None and nested is None and item.get("workflow") is None:
                raise self.check.fail(here, f"step {name!r} needs an `action`, nested `steps` "
                                            f"or a `workflow`")
            local = set(known)
            if item.get("for_each") is not None:
                self.text(item["for_each"], f"{here}.for_each", known)
                local.add(item.get("as", "item"))
            for key in ("on_error", "on_interrupt"):
                choices = ON_ERROR if key == "on_error" else ON_INTERRUPT
                self.check.choice(item.get(key), choices, f"{here}.{key}", key)
            for key in ("context", "cache"):
                self.check.choice(item.get(key), STRATEGIES[key], f"{here}.{key}",
                                  f"{key} strategy")
            self.text(item.get("condition"), f"{here}.condition", local)
            self.condition(item.get("condition"), f"{here}.condition")
            self.action(action, f"{here}.action", local)
            self.text(item.get("prompt"), f"{here}.prompt", local)
            self.nested(item.get("workflow"), f"{here}.workflow")
            children = self.steps(nested, f"{here}.steps", local) if nested else []
            retry = self.retry(item.get("retry"), f"{here}.retry")
            step = StepSpec(
                name=name, action=action, capture=item.get("capture"),
                transform=item.get("transform"), on_error=item.get("on_error", "fail"),
                on_interrupt=item.get("on_interrupt"), condition=item.get("condition"),
                for_each=item.get("for_each"), as_=item.get("as", "item"),
                parallel=item.get("parallel", False),
                max_concurrency=item.get("max_concurrency", 4), steps=children,
                context=item.get("context"), cache=item.get("cache"), retry=retry,
                timeout=item.get("timeout"), workflow=item.get("workflow"),
                prompt=item.get("prompt"), max_turns=item.get("max_turns"),
                line=self.check.line_of(here),
            )
            if step.capture:
                known.add(step.capture)
            out.append(step)
        return out

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
            if item.get("capture"):
                known.add(item["capture"])
        for index, item in enumerate(raw):
            here = f"states.{index}"
            for key in ("action", "on_entry", "on_exit"):
                self.action(item.get(key), f"{here}.{key}", known)
            self.check.choice(item.get("on_interrupt"), ON_INTERRUPT, f"{here}.on_interrupt",
                              "on_interrupt")
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
                self.condition(t.get("condition"), f"{t_here}.condition")
                transitions.append(TransitionSpec(next=t["next"],
                                                  condition=t.get("condition", "always"),
                                                  line=self.check.line_of(t_here)))
            terminal = item.get("terminal", False)
            self.check.choice(item.get("status"), ("done", "failed"), f"{here}.status",
                              "terminal status")
            if ("status" in item or "summary" in item) and not terminal:
                key = "status" if "status" in item else "summary"
                raise self.check.fail(f"{here}.{key}", f"`{key}` applies to terminal states only")
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
