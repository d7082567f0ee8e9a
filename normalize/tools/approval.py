"""The approval policy: which side-effecting actions run, which ask a person, which are refused.

Read-only tools never reach the policy. A `run` command is judged part by part
(`pytest; rm -rf ~` is two parts, `ls && rm x` too); every part must pass.

| the action                                   | ask    | auto   | yes    | never   |
|----------------------------------------------|--------|--------|--------|---------|
| matches a `deny` pattern                     | refuse | refuse | refuse | refuse  |
| `run`/`test` part holds `$(` or a backtick   | refuse | refuse | refuse | refuse  |
| matches an `allow` pattern, or remembered    | run    | run    | run    | run     |
| `edit` / `write` (the guard confines them)   | person | run    | run    | refuse  |
| `test`, or a known checker (list below)      | person | run    | run    | refuse  |
| any other command                            | person | person | run    | refuse  |

`person`: the approver callable on the context is asked (`yes` / `no` /
`always`; `always` remembers the program, e.g. `rm` or `python -m pytest`, for
the rest of the run). Without one, `ask` mode — and `auto` when the policy is
`interactive` — answers with a *waiting* verdict carrying a `Wait(kind="approval")`,
so the task can wait for an answer; non-interactive `auto` refuses and says how
to allow the command. Nothing is ever approved automatically for want of a person.

Known checkers: test runners (`pytest`, `python -m pytest`, `npm test`, `cargo
test`, `go test`, `tox`, `nox`), type checkers (`mypy`, `pyright`), linters in
check mode (`ruff check`, `ruff format --check`, `flake8`, `eslint`) and `git
status/diff/log/show` — never with a redirection or a writing flag such as `--fix`.

Patterns are `fnmatch` patterns matched (case-sensitively) against each part's
text and the whole command: `"pytest*"`, `"rm *"`. For other tools the text is
the tool and its arguments: `"edit src/*"`, `"write docs/*"`, `"test *"`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from normalize.errors import ConfigError
from normalize.task import Action, ActionResult, ResultStatus, Wait
from normalize.tools.shell import command_parts, text_after_verb, unquoted_operators

if TYPE_CHECKING:
    from normalize.tools.base import ToolContext

__all__ = ["KNOWN_CHECKERS", "ApprovalMode", "ApprovalPolicy", "is_known_checker"]


class ApprovalMode(StrEnum):
    """How side effects are approved; see the module docstring's table."""

    ASK = "ask"
    AUTO = "auto"
    YES = "yes"
    NEVER = "never"


KNOWN_CHECKERS: tuple[tuple[str, ...], ...] = (
    ("pytest",),
    ("py.test",),
    ("npm", "test"),
    ("npm", "run", "test"),
    ("cargo", "test"),
    ("go", "test"),
    ("tox",),
    ("nox",),
    ("mypy",),
    ("pyright",),
    ("ruff", "check"),
    ("ruff", "format", "--check"),
    ("flake8",),
    ("eslint",),
    ("git", "status"),
    ("git", "diff"),
    ("git", "log"),
    ("git", "show"),
)
"""Command prefixes that `auto` runs without asking (flags may follow anywhere)."""

_WRITING_FLAGS = (
    "--fix",
    "--unsafe-fixes",
    "--add-noqa",
    "--install-types",
    "--output",
    "--ext-diff",
    "--basetemp",
    "--watch",
)
_REDIRECTIONS = frozenset({">", ">>", "<"})
_SUBSTITUTION_RE = re.compile(r"\$\(|`")
_PYTHON_RE = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_ANSWERS = {"y": "yes", "yes": "yes", "a": "always", "always": "always"}
_CONFIG_KEYS = ("mode", "allow", "deny", "allow_shell")


def _program(words: list[str]) -> list[str]:
    """Words with the program reduced to its name and `python -m X` read as `X`.

    A program given by path keeps its path unless it is relative and stays
    inside the workspace (`.venv/bin/pytest`), so `/tmp/x/pytest` is no checker.
    """
    if not words:
        return words
    first = words[0]
    if "/" in first and (os.path.isabs(first) or ".." in first.split("/")):
        return words
    name = os.path.basename(first).removesuffix(".exe")
    rest = words[1:]
    if _PYTHON_RE.match(name) and len(rest) >= 2 and rest[0] == "-m":
        return [rest[1], *rest[2:]]
    if name == "git":
        rest = [w for w in rest if w != "--no-pager"]
    return [name, *rest]


def is_known_checker(words: list[str]) -> bool:
    """True for a test runner, type checker, check-mode linter or read-only git command."""
    words = _program(words)
    if any(w in _REDIRECTIONS for w in words):
        return False
    if any(w.startswith(_WRITING_FLAGS) for w in words):
        return False
    if words and words[0] == "eslint" and any(w in ("-o", "--output-file") for w in words):
        return False
    for prefix in KNOWN_CHECKERS:
        head = [p for p in prefix if not p.startswith("-")]
        flags = [p for p in prefix if p.startswith("-")]
        if words[: len(head)] == head and all(f in words for f in flags):
            return True
    return False


def _remember_key(words: list[str]) -> str:
    """What `always` remembers: the program name, or `python -m X` for a module."""
    if not words:
        return ""
    name = os.path.basename(words[0]).removesuffix(".exe")
    if _PYTHON_RE.match(name) and len(words) >= 3 and words[1] == "-m":
        return f"python -m {words[2]}"
    return words[0]


@dataclass
class _Part:
    text: str
    words: list[str]
    kind: str  # "checker" | "edit" | "other"
    key: str


def _parts(action: Action) -> tuple[str, list[_Part]]:
    """The whole command text and the parts to judge."""
    args = action.args
    if action.tool == "run":
        whole = " ".join(args)
        parts = [
            _Part(
                " ".join(words),
                words,
                "checker" if is_known_checker(words) else "other",
                _remember_key(words),
            )
            for words in command_parts(action)
        ]
        return whole, parts
    whole = " ".join([action.tool, *args])
    if action.tool == "test":
        kind = "checker"
    elif action.tool in ("edit", "write"):
        kind = "edit"
    else:
        kind = "other"
    return whole, [_Part(whole, [action.tool, *args], kind, f"tool:{action.tool}")]


@dataclass
class ApprovalPolicy:
    """Judges side-effecting actions; `check` returns None to let an action run."""

    mode: ApprovalMode = ApprovalMode.ASK
    interactive: bool = False
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    allow_shell: bool = False
    remembered: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.mode = _mode(self.mode)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, interactive: bool = False) -> ApprovalPolicy:
        """A policy from a `[workflow.permissions]` table; unknown keys are a `ConfigError`."""
        for key in config:
            if key not in _CONFIG_KEYS:
                raise ConfigError(
                    f"unknown key {key!r} in [workflow.permissions]; expected one of: "
                    f"{', '.join(_CONFIG_KEYS)}"
                )
        allow_shell = config.get("allow_shell", False)
        if not isinstance(allow_shell, bool):
            raise ConfigError("[workflow.permissions] allow_shell must be true or false")
        return cls(
            mode=_mode(config.get("mode", ApprovalMode.ASK)),
            interactive=interactive,
            allow=_patterns(config, "allow"),
            deny=_patterns(config, "deny"),
            allow_shell=allow_shell,
        )

    def check(self, action: Action, ctx: ToolContext) -> ActionResult | None:
        """None when `action` may run; otherwise the verdict to return instead of running it.

        With `allow_shell`, an allowed `run` whose text holds shell syntax is marked
        to run through `/bin/sh -c` (every part of it was judged first).
        """
        verdict = self._judge(action, ctx)
        if verdict is None and self.allow_shell and action.tool == "run":
            rest = text_after_verb(action)
            if rest is not None and unquoted_operators(rest):
                action.params["shell"] = True
        return verdict

    def _judge(self, action: Action, ctx: ToolContext) -> ActionResult | None:
        whole, parts = _parts(action)
        if not parts:
            return None
        for pattern in self.deny:
            hits = [part.text for part in parts if fnmatchcase(part.text, pattern)]
            if hits or fnmatchcase(whole, pattern):
                shown = hits[0] if hits else whole
                return ActionResult.blocked(
                    f"refused `{shown}`: it matches the deny pattern {pattern!r}"
                )
        if not self.allow_shell and action.tool in ("run", "test"):
            for part in parts:
                if _SUBSTITUTION_RE.search(part.text):
                    return ActionResult.blocked(
                        f"refused `{part.text}`: command substitution (`$(...)` or backticks) "
                        f"is not allowed; set allow_shell = true in [workflow.permissions] to "
                        f"permit it"
                    )
        pending = [part for part in parts if not self._passes(part)]
        if not pending:
            return None
        if self.mode is ApprovalMode.NEVER:
            return ActionResult.blocked(
                f"refused `{pending[0].text}`: the approval mode is `never`; allow it with an "
                f"allow pattern such as {_suggest(pending[0])!r} in [workflow.permissions]"
            )
        return self._escalate(action, ctx, whole, parts, pending)

    def _passes(self, part: _Part) -> bool:
        if any(fnmatchcase(part.text, pattern) for pattern in self.allow):
            return True
        if part.key in self.remembered:
            return True
        if self.mode is ApprovalMode.YES:
            return True
        return self.mode is ApprovalMode.AUTO and part.kind in ("checker", "edit")

    def _escalate(
        self,
        action: Action,
        ctx: ToolContext,
        whole: str,
        parts: list[_Part],
        pending: list[_Part],
    ) -> ActionResult | None:
        """Ask a person about the parts that need one, or say why no one can be asked."""
        names = ", ".join(f"`{part.text}`" for part in pending)
        label = whole if action.tool == "run" else whole.split(" ", 1)[-1]
        question = f"Allow {action.tool} `{label}`?"
        if len(parts) > 1:
            question += f" (needs approval: {names})"
        if ctx.approver is not None:
            answer = _ANSWERS.get(str(ctx.approver(question)).strip().lower(), "no")
            if answer == "always":
                self.remembered.update(part.key for part in pending)
            if answer in ("yes", "always"):
                return None
            return ActionResult.blocked(f"not approved: {names}")
        if self.mode is ApprovalMode.ASK or self.interactive:
            return ActionResult(
                status=ResultStatus.BLOCKED,
                error=f"waiting for approval: {action.tool} `{label}`",
                wait=Wait(kind="approval", question=question, action=action),
            )
        return ActionResult.blocked(
            f"refused {names}: it needs approval and no one can give it in this "
            f"non-interactive run; allow it with `--approve yes` or an allow pattern such as "
            f"{_suggest(pending[0])!r} in [workflow.permissions]"
        )


def _mode(value: object) -> ApprovalMode:
    if isinstance(value, str) and value in {m.value for m in ApprovalMode}:
        return ApprovalMode(value)
    choices = ", ".join(m.value for m in ApprovalMode)
    raise ConfigError(f"unknown approval mode {value!r}; expected one of: {choices}")


def _suggest(part: _Part) -> str:
    """An allow pattern that would let `part` through: `rm *`, `ls`, `edit *`."""
    if not part.words:
        return "*"
    return part.words[0] if len(part.words) == 1 else f"{part.words[0]} *"


def _patterns(config: Mapping[str, Any], key: str) -> list[str]:
    value = config.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[workflow.permissions] {key} must be a list of strings")
    return list(value)
