"""Checking a workflow's steps and states: names, variables, commands, plugins, nesting.

The rules between a step's keys are tables (`NEEDS`, `NEEDS_ANY`, `CONFLICTS`,
`POSITIVE`, `CHOICES`, `VALUE_CHECKS`), so each rule is one line to read or change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError, UsageError
from normalize.intents import parse_command, verb_for
from normalize.keys import closest, parse_table
from normalize.plugins import PluginGroup
from normalize.tables import RetrySettings
from normalize.verbs import all_words
from normalize.workflow.bounds import MAX_NESTED_DEPTH, LimitError, as_limit
from normalize.workflow.check import Checker
from normalize.workflow.interpolate import variables_in
from normalize.workflow.schema import (
    BUILTIN_CONDITIONS,
    BUILTIN_VARS,
    DEFAULT_MAX_ITERATIONS,
    NAME_RE,
    ON_ERROR,
    ON_INTERRUPT,
    STRATEGIES,
    TRANSFORMS,
    VAR_TOKEN_RE,
)
from normalize.workflow.spec import StateSpec, StepSpec, TransitionSpec, WorkflowSpec

NameCheck = Callable[[str], bool]


def _registry(group: str) -> PluginGroup[Any]:
    """The plugin registry of `group` (conditions, sources, steps), imported on first use."""
    if group == "conditions":
        from normalize.workflow.conditions import CONDITIONS

        return CONDITIONS
    if group == "sources":
        from normalize.workflow.sources import SOURCES

        return SOURCES
    from normalize.workflow.steps import STEPS

    return STEPS


def _registered(group: str) -> NameCheck:
    """Whether a name is registered (and loads) in a plugin group."""

    def check(name: str) -> bool:
        if group == "conditions":
            from normalize.workflow.conditions import is_condition

            return is_condition(name)
        if group == "steps":
            from normalize.workflow.steps import is_step_kind

            return is_step_kind(name)
        registry = _registry(group)
        if name not in registry:
            return False
        try:
            registry.get(name)
        except KeyError:
            return False
        return True

    return check


def broken_plugin(group: str, name: str) -> str | None:
    """Why the plugin `name` of `group` (conditions, sources, steps) failed to load, if it did."""
    registry = _registry(group)
    if name not in registry:
        return None
    try:
        registry.get(name)
    except KeyError:
        found = [w for w in registry.warnings if f"plugin {name!r}" in w]
        return found[0].split(": ", 1)[-1] if found else f"plugin {name!r} failed to load"
    return None


class Plugins:
    """What the validator asks about plugin names (the registries unless given)."""

    def __init__(self, is_condition: NameCheck | None = None,
                 is_step_kind: NameCheck | None = None,
                 is_source: NameCheck | None = None) -> None:
        self.is_condition = is_condition or _registered("conditions")
        self.is_step_kind = is_step_kind or _registered("steps")
        self.is_source = is_source or _registered("sources")


LoadNested = Callable[[Path, Plugins, tuple[Path, ...]], WorkflowSpec]
"""Loads a nested workflow file (given the files that include it, for cycles)."""

NEEDS: dict[str, tuple[str, str]] = {
    "as": ("for_each", "`as` needs `for_each`"),
    "parallel": ("for_each", "`parallel` needs `for_each`"),
    "max_concurrency": ("for_each", "`max_concurrency` needs `for_each`"),
    "max_iterations": ("until", "`max_iterations` bounds an `until` loop; add `until`"),
    "else": ("condition", "`else` runs when `condition` does not hold; add `condition`"),
    "transform": ("capture", "`transform` shapes a captured value; add `capture`"),
    "merge": ("isolation", "`merge` says what becomes of an isolated sub-task's changes; add "
                           "`isolation = \"isolated\"`"),
    "schema": ("capture", "`schema` checks a captured value; add `capture`"),
}
"""A step key that means nothing without another: key → (the other, the error)."""

NEEDS_ANY: dict[str, tuple[tuple[str, ...], str]] = {
    "isolation": (("for_each", "workflow"), "`isolation` makes each item of a `for_each`, or "
                                            "a nested `workflow`, a sub-task; add one"),
}
"""A step key that means nothing without one of some others: key → (the others, the error)."""

CONFLICTS: tuple[tuple[str, str, str], ...] = (
    ("parallel", "steps", "`parallel` fans out one `action` over the items; nested steps run "
                          "in order"),
    ("parallel", "workflow", "`parallel` fans out one `action`, not a nested workflow"),
    ("until", "for_each", "a step loops over `for_each` or `until`, not both"),
    ("schema", "parallel", "`schema` checks one captured value; a parallel fan-out captures a "
                           "list of them"),
)
"""Step keys that cannot be set together: (the key blamed, the other, the error)."""

POSITIVE = ("max_concurrency", "timeout", "max_turns", "max_iterations")

CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "on_error": (ON_ERROR, "on_error"),
    "on_interrupt": (ON_INTERRUPT, "on_interrupt"),
    "context": (STRATEGIES["context"], "context strategy"),
    "cache": (STRATEGIES["cache"], "cache strategy"),
    "isolation": (("shared", "isolated"), "isolation"),
    "merge": (("apply", "none"), "merge"),
}

FIELDS = {"as": "as_", "harness": "action"}
"""Step keys whose StepSpec field is spelt differently (the rest keep their names): a
`harness = NAME` step is the step kind NAME, so it is kept as `action = NAME`."""
FORMS = ("action", "harness", "steps", "workflow")
"""What a step runs; it names exactly one (a state at most one, and not `steps`)."""
BUILT = frozenset({"name", "steps", "else", "retry"})
"""Step keys the validator turns into their field itself."""


RULE_KEYS = frozenset({*NEEDS, *NEEDS_ANY, *(blamed for blamed, _, _ in CONFLICTS), *POSITIVE,
                       *CHOICES})
"""The keys the four tables above look at: a step with none of them passes them all."""


def _chain(files: tuple[Path, ...]) -> str:
    """A chain of nested files by name, its middle left out when long."""
    names = [p.name for p in files]
    shown = names if len(names) <= 6 else [*names[:3], "…", *names[-2:]]
    return " → ".join(shown)


def _given(item: dict[str, Any], key: str) -> bool:
    return item.get(key) not in (None, False, "", [])


class Validator:
    """Checks steps and states, and loads nested workflow files."""

    def __init__(self, check: Checker, plugins: Plugins, stack: tuple[Path, ...],
                 load: LoadNested) -> None:
        self.check = check
        self.plugins = plugins
        self.stack = stack
        self.load = load
        self.includes: dict[str, Any] = {}
        self.problems: list[ConfigError] = []  # one per broken step or state, in file order
        self.parsed: dict[str, str | None] = {}  # command text → why it does not parse

    def raise_problems(self) -> None:
        """Raise the first problem found, carrying the others (`workflows validate` lists all)."""
        if self.problems:
            first, *others = self.problems
            first.others = others
            raise first

    # -- values ----------------------------------------------------------

    def text(self, value: str | None, where: str, known: set[str]) -> None:
        """Every `{variable}` in `value` is known at this point."""
        if value is None:
            return
        for name in variables_in(value):
            if name.split(".")[0] not in known:
                raise self.check.fail(where, f"unknown variable {{{name}}} (known: "
                                             f"{', '.join(sorted(known)) or 'none'})")

    def action(self, value: str | None, where: str, known: set[str]) -> None:
        """A command of the command language, or a step kind."""
        if value is None:
            return
        self.text(value, where, known)
        first = value.split(None, 1)[0] if value.strip() else ""
        if not first:
            raise self.check.fail(where, "empty action")
        if self.plugins.is_step_kind(first):
            return
        if verb_for(first) is None:
            broken = broken_plugin("steps", first)
            if broken:
                raise self.check.fail(where, f"step kind {first!r}: {broken}")
            near = closest(first, [*all_words(), *_registry("steps").names()])
            hint = f"; did you mean {near!r}?" if near else ""
            raise self.check.fail(where, f"unknown command or step kind {first!r} in "
                                         f"action {value!r}{hint}")
        problem = self._command_problem(VAR_TOKEN_RE.sub("x", value))
        if problem is not None:
            raise self.check.fail(where, f"invalid action: {problem}")

    def _command_problem(self, command: str) -> str | None:
        """Why `command` does not parse, or None; each distinct text is parsed once."""
        if command not in self.parsed:
            try:
                parse_command(command)
                self.parsed[command] = None
            except UsageError as exc:
                self.parsed[command] = str(exc)
        return self.parsed[command]

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
            self._regex(arg, value, where)
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

    def _regex(self, pattern: str, value: str, where: str) -> None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.check.fail(where, f"invalid regex in {value!r}: {exc}") from None

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
            self._regex(arg, value, where)

    def nested(self, value: str | None, where: str) -> None:
        """A nested `workflow` file: found, not a cycle, valid (kept in `includes`)."""
        if value is None:
            return
        base = self.stack[-1].parent
        target = (base / value).resolve()
        if target in self.stack:
            chain = " → ".join(p.name for p in (*self.stack, target))
            raise self.check.fail(where, f"nested workflows form a cycle: {chain}")
        if len(self.stack) > MAX_NESTED_DEPTH:
            raise self._limit(where, f"nested workflows go more than {MAX_NESTED_DEPTH} files "
                                     f"deep: {_chain((*self.stack, target))}")
        if not target.is_file():
            raise self.check.fail(where, f"nested workflow {value!r} not found")
        try:
            self.includes[value] = self.load(target, self.plugins, self.stack).to_dict()
        except ConfigError as exc:
            if exc.file is not None:
                raise
            if isinstance(exc, LimitError):  # a bound of the whole load: at this step
                raise self._limit(where, exc.text) from None
            raise self.check.fail(where, exc.text) from None  # the file could not be read

    def _limit(self, where: str, message: str) -> LimitError:
        """A `LimitError` at `where`: it ends the check of every file up the chain."""
        return as_limit(self.check.fail(where, message))

    def capture(self, value: str | None, where: str) -> None:
        if value is not None and not NAME_RE.fullmatch(value):
            raise self.check.fail(where, f"invalid variable name {value!r} in `capture`")
        if value in BUILTIN_VARS:
            raise self.check.fail(where, f"{{{value}}} is built in; capture into another name")

    def schema_file(self, value: str, where: str) -> dict[str, Any]:
        """The JSON Schema in the file `value` (beside the workflow), checked."""
        from normalize.structured import load_contract

        try:
            return load_contract(self.check.path.parent / value, flag="schema").schema
        except UsageError as exc:
            raise self.check.fail(where, str(exc)) from None

    def retry(self, value: Any, where: str) -> RetrySettings | None:
        """A step's `retry` (`"fixed"` is `{strategy = "fixed"}`), typed as `[workflow.retry]`."""
        if value is None:
            return None
        table = {"strategy": value} if isinstance(value, str) else dict(value)
        return parse_table(RetrySettings, table, where, self.check.fail)

    # -- steps -----------------------------------------------------------

    def steps(self, raw: list[dict[str, Any]], where: str, known: set[str]) -> list[StepSpec]:
        """Check a list of steps; adds the variables they capture to `known`."""
        out: list[StepSpec] = []
        for index, item in enumerate(raw):
            try:
                out.append(self.step(item, f"{where}.{index}", index, known))
            except LimitError:
                raise
            except ConfigError as exc:  # go on: a file's every broken step is reported at once
                self.problems.append(exc)
                if isinstance(item, dict) and isinstance(item.get("capture"), str):
                    known.add(item["capture"])  # no second error for its users
        return out

    def step(self, item: dict[str, Any], here: str, index: int, known: set[str]) -> StepSpec:
        """Check one step and build its spec; what it captures joins `known` after it."""
        self.check.table(item, "step", here)
        name = item.get("name", f"step {index + 1}")
        self._one_form(item, here, name)
        local = set(known)
        if item.get("for_each") is not None:
            self.source(item["for_each"], f"{here}.for_each", known)
            as_name = item.get("as", "item")
            if not NAME_RE.fullmatch(as_name):
                raise self.check.fail(f"{here}.as", f"invalid variable name {as_name!r} in `as`")
            local.add(as_name)
        self._key_rules(item, here)
        for key, check in VALUE_CHECKS.items():
            if key in item:  # every check passes a missing (None) value
                check(self, item[key], f"{here}.{key}", local)
        inner = set(local)
        children = self.steps(item["steps"], f"{here}.steps", inner) if item.get("steps") else []
        if item.get("capture"):
            inner.add(item["capture"])
        self.text(item.get("until"), f"{here}.until", inner)
        self.condition(item.get("until"), f"{here}.until")
        otherwise_known = set(known)
        otherwise = self.steps(item["else"], f"{here}.else", otherwise_known) \
            if item.get("else") else []
        retry = self.retry(item.get("retry"), f"{here}.retry")
        fields = {FIELDS.get(k, k): v for k, v in item.items() if k not in BUILT}
        if "until" in item:
            fields.setdefault("max_iterations", DEFAULT_MAX_ITERATIONS)
        if "schema" in item:
            fields["schema"] = self.schema_file(item["schema"], f"{here}.schema")
        # what the step (or its nested steps, or its `else`) captures is known after it
        known |= (inner - local) | (otherwise_known - known)
        return StepSpec(name=name, steps=children, otherwise=otherwise, retry=retry,
                        line=self.check.line_of(here), **fields)

    def _one_form(self, item: dict[str, Any], here: str, name: str) -> None:
        if not self._forms(item, here, f"step {name!r}"):
            raise self.check.fail(here, f"step {name!r} needs an `action`, a `harness`, "
                                        f"nested `steps` or a `workflow`")

    def _forms(self, item: dict[str, Any], here: str, what: str) -> list[str]:
        """The `FORMS` keys `item` sets; two of them are an error."""
        forms = [k for k in FORMS if item.get(k) is not None]
        if len(forms) > 1:
            raise self.check.fail(f"{here}.{forms[1]}", f"{what} has both `{forms[0]}` "
                                                        f"and `{forms[1]}`; give it one")
        return forms

    def harness(self, value: str | None, where: str) -> None:
        """`harness = NAME`: one of the agents a step can hand its turn to."""
        from normalize.workflow.steps import HARNESS_KINDS

        if value is not None and value not in HARNESS_KINDS:
            raise self.check.fail(where, f"unknown harness {value!r} (choose from "
                                         f"{', '.join(HARNESS_KINDS)})")

    def _key_rules(self, item: dict[str, Any], here: str) -> None:
        """The NEEDS, CONFLICTS, POSITIVE and CHOICES tables, applied to one step."""
        if RULE_KEYS.isdisjoint(item):
            return
        for key, (needed, message) in NEEDS.items():
            if key in item and needed not in item:
                raise self.check.fail(f"{here}.{key}", message)
        for key, (others, message) in NEEDS_ANY.items():
            if key in item and not any(other in item for other in others):
                raise self.check.fail(f"{here}.{key}", message)
        for key, other, message in CONFLICTS:
            if _given(item, key) and _given(item, other):
                raise self.check.fail(f"{here}.{key}", message)
        for key in POSITIVE:
            self.check.positive(item, key, here)
        for key, (choices, what) in CHOICES.items():
            self.check.choice(item.get(key), choices, f"{here}.{key}", what)

    # -- states ----------------------------------------------------------

    def states(self, raw: list[dict[str, Any]], known: set[str]) -> list[StateSpec]:
        """Check the state machine: names first (transitions may point forward), then each."""
        known = set(known)
        names = self._state_names(raw, known)
        out: list[StateSpec] = []
        for index, item in enumerate(raw):
            try:
                out.append(self._state(item, f"states.{index}", names, known))
            except LimitError:
                raise
            except ConfigError as exc:
                self.problems.append(exc)
        if not self.problems:
            self._reachability(out)
        return out

    def _state_names(self, raw: list[dict[str, Any]], known: set[str]) -> list[str]:
        """The states' names (unique); what they capture joins `known`."""
        names: list[str] = []
        for index, item in enumerate(raw):
            here = f"states.{index}"
            self.check.table(item, "state", here)
            if "name" not in item:
                raise self.check.fail(here, "state needs a `name`")
            if item["name"] in names:
                raise self.check.fail(f"{here}.name", f"duplicate state {item['name']!r}")
            names.append(item["name"])
            capture = item.get("capture")
            if capture is not None:
                if not NAME_RE.fullmatch(capture) or capture in BUILTIN_VARS:
                    raise self.check.fail(f"{here}.capture", f"invalid variable name "
                                                             f"{capture!r} in `capture`")
                known.add(capture)
        return names

    def _state(self, item: dict[str, Any], here: str, names: list[str],
               known: set[str]) -> StateSpec:
        self._forms(item, here, f"state {item['name']!r}")
        self.harness(item.get("harness"), f"{here}.harness")
        for key in ("action", "on_entry", "on_exit"):
            self.action(item.get(key), f"{here}.{key}", known)
        self.check.choice(item.get("on_interrupt"), ON_INTERRUPT, f"{here}.on_interrupt",
                          "on_interrupt")
        self.check.positive(item, "timeout", here)
        self.check.positive(item, "max_turns", here)
        self.text(item.get("prompt"), f"{here}.prompt", known)
        self.nested(item.get("workflow"), f"{here}.workflow")
        transitions = [self._transition(t, f"{here}.transitions.{i}", names, known)
                       for i, t in enumerate(item.get("transitions", []))]
        self._terminal(item, here, bool(transitions))
        self.text(item.get("summary"), f"{here}.summary", known)
        fields = {FIELDS.get(k, k): v for k, v in item.items() if k != "transitions"}
        return StateSpec(transitions=transitions, line=self.check.line_of(here), **fields)

    def _transition(self, t: dict[str, Any], here: str, names: list[str],
                    known: set[str]) -> TransitionSpec:
        self.check.table(t, "transition", here)
        if "next" not in t:
            raise self.check.fail(here, "transition needs `next`")
        if t["next"] not in names:
            raise self.check.fail(f"{here}.next", f"unknown state {t['next']!r} in `next` "
                                                  f"(states: {', '.join(names)})")
        self.text(t.get("condition"), f"{here}.condition", known)
        self.condition(t.get("condition"), f"{here}.condition", in_state=True)
        return TransitionSpec(next=t["next"], condition=t.get("condition", "always"),
                              line=self.check.line_of(here))

    def _terminal(self, item: dict[str, Any], here: str, has_transitions: bool) -> None:
        """A terminal state runs nothing and leads nowhere; only it has a status or summary."""
        terminal = item.get("terminal", False)
        self.check.choice(item.get("status"), ("done", "failed", "stuck"), f"{here}.status",
                          "terminal status")
        if ("status" in item or "summary" in item) and not terminal:
            key = "status" if "status" in item else "summary"
            raise self.check.fail(f"{here}.{key}", f"`{key}` applies to terminal states only")
        if terminal:
            for key in ("action", "harness", "workflow", "on_entry", "on_exit", "capture"):
                if key in item:
                    raise self.check.fail(f"{here}.{key}", f"terminal state {item['name']!r} "
                                                           f"runs nothing; drop `{key}`")
        if not terminal and not has_transitions:
            raise self.check.fail(here, f"state {item['name']!r} is not terminal and has "
                                        f"no transitions")
        if terminal and has_transitions:
            raise self.check.fail(f"{here}.terminal", f"terminal state {item['name']!r} "
                                                      f"cannot have transitions")

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


ValueCheck = Callable[[Validator, Any, str, set[str]], None]


def _condition(v: Validator, value: Any, where: str, known: set[str]) -> None:
    v.text(value, where, known)
    v.condition(value, where)


VALUE_CHECKS: dict[str, ValueCheck] = {
    "condition": _condition,
    "action": Validator.action,
    "harness": lambda v, value, where, _known: v.harness(value, where),
    "prompt": Validator.text,
    "workflow": lambda v, value, where, _known: v.nested(value, where),
    "transform": Validator.transform,
    "capture": lambda v, value, where, _known: v.capture(value, where),
}
"""A step key → how its value is checked (with the variables known inside the step)."""
