"""The approval policy: which side-effecting actions run, which ask a person, which are refused.

Approvals decide who says yes; the sandbox (`normalize.sandbox`) decides what
a yes can touch. So a program the sandbox confines is not a risk class of its
own: what asks is what leaves the boundary. Read-only tools never reach the
policy. A `run` command is judged part by part (`pytest; rm -rf ~` is two
parts, `ls && rm x` too); every part must pass.

| the action                                          | ask    | auto   | yes    | never   |
|-----------------------------------------------------|--------|--------|--------|---------|
| matches a `deny` pattern                            | refuse | refuse | refuse | refuse  |
| `run`/`test` part holds `$(` or a backtick          | refuse | refuse | refuse | refuse  |
|   (unless `allow_shell`; the shell is confined too) |        |        |        |         |
| matches an `allow` pattern, or remembered           | run    | run    | run    | run     |
| a loaded skill's `allowed-tools` pre-approves it,   | run    | run    | run    | refuse  |
|   and it is neither destructive nor leaving the     |        |        |        |         |
|   boundary (`normalize.skills.grants`)              |        |        |        |         |
| a program leaving the boundary: `network = true`,   | person | person | run    | refuse  |
|   `--sandbox off`, no sandbox on this machine, or   |        |        |        |         |
|   hosts a workspace file narrowed `true` down to    |        |        |        |         |
| a destructive command (list below)                  | person | person | run    | refuse  |
| any other `run` / `test` (the sandbox confines it)  | person | run    | run    | refuse  |
| `edit` / `write` (the guard confines them)          | person | run    | run    | refuse  |
| `mcp` tool the server marks read-only (readOnlyHint)| person | run    | run    | refuse  |
| any other `mcp` tool                                | person | person | run    | refuse  |

`person`: the approver callable on the context is asked (`yes` / `no` /
`always`; `always` remembers the program, e.g. `rm` or `python -m pytest`, for
the rest of the run). Without one, `ask` mode — and `auto` when the policy is
`interactive` — answers with a *waiting* verdict carrying a `Wait(kind="approval")`,
so the task can wait for an answer; non-interactive `auto` refuses and says how
to allow the command. Nothing is ever approved automatically for want of a person.
When the sandbox is unavailable the question says so, and a person's yes runs
that one program unconfined.

Destructive, even inside the workspace: `rm -r`/`-rf`, `git reset --hard`,
`git clean`, `git checkout -- …`/`git checkout .`, `git restore`, `git stash
drop|clear`, `git branch -D`, `find … -delete` or `-exec rm`, `shred`, also
behind `env`, `sudo`, `xargs`, `nice`, `nohup`, `time`, `timeout`.

Patterns are `fnmatch` patterns matched (case-sensitively) against each part's
text and the whole command: `"pytest*"`, `"rm *"`. For other tools the text is
the tool and its arguments: `"edit src/*"`, `"write docs/*"`, `"test *"`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Protocol

from normalize.errors import ConfigError, NormalizeError
from normalize.sandbox import SandboxMode, SandboxPolicy, probe
from normalize.skills.grants import Grant
from normalize.task import Action, ActionResult, ResultStatus, Wait
from normalize.tools.shell import command_parts, text_after_verb, unquoted_operators

if TYPE_CHECKING:
    from normalize.mcp.client import McpSessions


class PolicyContext(Protocol):
    """What the policy reads of a tool context (a `ToolContext` is one)."""

    @property
    def sandbox(self) -> SandboxPolicy: ...

    @property
    def approver(self) -> Callable[[str], str] | None: ...

    @property
    def mcp(self) -> McpSessions | None: ...

__all__ = ["UNCONFINED_PARAM", "ApprovalMode", "ApprovalPolicy", "Question", "is_destructive",
           "outside_reason", "persons_call"]


class ApprovalMode(StrEnum):
    """How side effects are approved; see the module docstring's table."""

    ASK = "ask"
    AUTO = "auto"
    YES = "yes"
    NEVER = "never"


_SUBSTITUTION_RE = re.compile(r"\$\(|`")
_PYTHON_RE = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_ANSWERS = {"y": "yes", "yes": "yes", "a": "always", "always": "always"}
_CONFIG_KEYS = ("mode", "allow", "deny", "allow_shell", "sandbox", "network", "env_allow")
_WRAPPERS = frozenset({"env", "sudo", "doas", "nice", "nohup", "time", "command", "xargs",
                       "stdbuf", "ionice", "timeout", "exec"})
UNCONFINED_PARAM = "_unconfined"
"""Set on an action when a person let it run without the sandbox (this machine has none)."""


def _unwrap(words: list[str]) -> list[str]:
    """The command behind `env X=1`, `sudo`, `xargs -0`, `timeout 5` and the like."""
    while words and os.path.basename(words[0]) in _WRAPPERS:
        wrapper = os.path.basename(words[0])
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]
                         or (wrapper == "timeout" and words[0][:1].isdigit())):
            words = words[1:]
    return words


def _git_destructive(args: list[str]) -> bool:
    while args and args[0].startswith("-"):  # git -C dir -c k=v --no-pager SUBCOMMAND
        args = args[2:] if args[0] in ("-C", "-c") else args[1:]
    if not args:
        return False
    sub, rest = args[0], args[1:]
    if sub == "reset":
        return any(w in ("--hard", "--merge", "--keep") for w in rest)
    if sub in ("clean", "restore"):
        return True
    if sub == "checkout":
        return any(w in ("--", ".", "-f", "--force", "-p", "--patch") for w in rest)
    if sub == "stash":
        return bool(rest) and rest[0] in ("drop", "clear")
    if sub == "branch":
        return any(w in ("-D", "--delete", "-d") for w in rest)
    if sub == "switch":
        return any(w in ("-f", "--force", "--discard-changes") for w in rest)
    return sub == "rm" and any(_recursive_flag(w) for w in rest)


def _recursive_flag(word: str) -> bool:
    if word == "--recursive":
        return True
    return word.startswith("-") and not word.startswith("--") and ("r" in word or "R" in word)


def is_destructive(words: list[str]) -> bool:
    """True for a command that deletes or discards work wholesale, even inside the workspace."""
    words = _unwrap(words)
    if not words:
        return False
    name, rest = os.path.basename(words[0]), words[1:]
    if name == "rm":
        return any(_recursive_flag(w) for w in rest)
    if name == "git":
        return _git_destructive(rest)
    if name == "find":
        return "-delete" in rest or any(
            w in ("-exec", "-execdir", "-ok") and i + 1 < len(rest)
            and os.path.basename(rest[i + 1]) in ("rm", "shred", "unlink")
            for i, w in enumerate(rest))
    return name == "shred"


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
    kind: str  # "confined" | "edit" | "outside" | "destructive" | "other"
    key: str


def outside_reason(sandbox: SandboxPolicy) -> str | None:
    """Why a program would leave the sandbox's boundary, or None when it stays inside."""
    if sandbox.mode is SandboxMode.OFF:
        return "it runs with --sandbox off"
    found = probe()
    if not found.available:
        return f"the sandbox is unavailable ({found.reason}), so it would run unconfined"
    if sandbox.network:
        return "it runs with network access"
    if sandbox.hosts and sandbox.hosts_ask:
        return f"it reaches {', '.join(sandbox.hosts)}, hosts a workspace file chose"
    return None


def persons_call(action: Action, sandbox: SandboxPolicy) -> str | None:
    """Why approving `action` is the person's call alone, or None when any answerer may.

    The person's: a program leaving the boundary (network, `--sandbox off`, no
    sandbox here), a destructive command, and a call to another MCP server's
    tool (whether that server marks it read-only is not known without starting it).
    """
    if action.tool in ("run", "test"):
        outside = outside_reason(sandbox)
        if outside is not None:
            return outside
    if action.tool == "run" and any(is_destructive(words) for words in command_parts(action)):
        return "it deletes or discards work in the workspace"
    if action.tool == "mcp" and len(action.args) >= 2:
        return "it calls a tool of another MCP server"
    return None


def _unconfinable(sandbox: SandboxPolicy) -> bool:
    """True when programs should be confined but this machine cannot confine them."""
    return sandbox.mode is not SandboxMode.OFF and not probe().available


def _program_kind(words: list[str], outside: str | None) -> str:
    if outside is not None:
        return "outside"
    return "destructive" if is_destructive(words) else "confined"


def _mcp_kind(action: Action, ctx: PolicyContext) -> str | None:
    """`confined` for a tool its server marks read-only, `mcp` otherwise; None: not a call.

    Looking the tool up starts its server; a failure (unknown server or tool, a
    server that cannot start) is kept for the tool to report, and nothing runs.
    """
    sessions, args = ctx.mcp, action.args
    if sessions is None or len(args) < 2:
        return None  # listing servers or tools, or no servers: read-only
    try:
        tool = sessions.tool(args[0], args[1])
    except NormalizeError as exc:
        sessions.failures[action.key] = str(exc)
        return None
    return "confined" if tool.read_only else "mcp"


def _parts(action: Action, outside: str | None,
           mcp_kind: str | None = None) -> tuple[str, list[_Part]]:
    """The whole command text and the parts to judge."""
    args = action.args
    if action.tool == "run":
        whole = " ".join(args)
        parts = [
            _Part(" ".join(words), words, _program_kind(words, outside), _remember_key(words))
            for words in command_parts(action)
        ]
        return whole, parts
    whole = " ".join([action.tool, *args])
    if action.tool == "record":  # it changes nothing: what it records was done already
        return whole, []
    if action.tool in ("test", "harness"):  # a harness's every command runs in the sandbox
        kind = "outside" if outside is not None else "confined"
    elif action.tool in ("edit", "write"):
        kind = "edit"
    elif action.tool == "spawn":  # a child runs under this same policy: each of its actions asks
        kind = "confined"
    elif action.tool == "mcp":
        if mcp_kind is None:
            return whole, []
        kind = mcp_kind
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
    granted: list[Grant] = field(default_factory=list)
    """What loaded skills pre-approve (`allowed-tools`): a yes in `ask` mode, for confined
    programs and edits only (`normalize.skills.grants`)."""

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

    def check(self, action: Action, ctx: PolicyContext,
              detail: Callable[[], str] | None = None) -> ActionResult | None:
        """None when `action` may run; otherwise the verdict to return instead of running it.

        `detail` says what the action would change (a diff); a person asked sees it first.

        With `allow_shell`, an allowed `run` whose text holds shell syntax is marked
        to run through `/bin/sh -c` (every part of it was judged first).
        """
        action.params.pop(UNCONFINED_PARAM, None)  # only a person's yes below may set it
        verdict = self._judge(action, ctx, detail)
        if verdict is None and self.allow_shell and action.tool == "run":
            rest = text_after_verb(action)
            if rest is not None and unquoted_operators(rest):
                action.params["shell"] = True
        return verdict

    def _judge(self, action: Action, ctx: PolicyContext,
               detail: Callable[[], str] | None) -> ActionResult | None:
        outside = self.outside(action, ctx)
        mcp_kind = _mcp_kind(action, ctx) if action.tool == "mcp" else None
        whole, parts = _parts(action, outside, mcp_kind)
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
        return self._escalate(action, ctx, whole, parts, pending, outside, detail)

    def outside(self, action: Action, ctx: PolicyContext) -> str | None:
        """Why the program `action` starts would leave the sandbox (None: it stays inside)."""
        return outside_reason(ctx.sandbox) if action.tool in ("run", "test", "harness") \
            else None

    def _passes(self, part: _Part) -> bool:
        if any(fnmatchcase(part.text, pattern) for pattern in self.allow):
            return True
        if part.key in self.remembered:
            return True
        if self.mode is ApprovalMode.YES:
            return True
        if part.kind not in ("confined", "edit"):  # leaving the sandbox, destroying work: asks
            return False
        return self.mode is ApprovalMode.AUTO or self._granted(part)

    def _granted(self, part: _Part) -> bool:
        """Whether a loaded skill pre-approves `part` (in `ask` mode; `never` refuses)."""
        tool = "run" if not part.key.startswith("tool:") else part.words[0]
        return self.mode is ApprovalMode.ASK and any(
            grant.covers(tool, part.words) for grant in self.granted)

    def _escalate(
        self,
        action: Action,
        ctx: PolicyContext,
        whole: str,
        parts: list[_Part],
        pending: list[_Part],
        outside: str | None,
        detail: Callable[[], str] | None = None,
    ) -> ActionResult | None:
        """Ask a person about the parts that need one, or say why no one can be asked."""
        names = ", ".join(f"`{part.text}`" for part in pending)
        label = whole if action.tool == "run" else whole.split(" ", 1)[-1]
        why = _why(pending, outside)
        question = f"Allow {action.tool} `{label}`?"
        if len(parts) > 1:
            question += f" (needs approval: {names})"
        if why:
            question += f" ({why})"
        if ctx.approver is not None:
            asked = Question(question, _shown(detail), covers([part.key for part in pending]))
            answer = _ANSWERS.get(str(ctx.approver(asked)).strip().lower(), "no")
            if answer == "always":
                self.remembered.update(part.key for part in pending)
            if answer in ("yes", "always"):
                if outside is not None and _unconfinable(ctx.sandbox):
                    action.params[UNCONFINED_PARAM] = True
                return None
            return ActionResult.blocked(f"not approved: {names}")
        if self.mode is ApprovalMode.ASK or self.interactive:
            return ActionResult(
                status=ResultStatus.BLOCKED,
                error=f"waiting for approval: {action.tool} `{label}`",
                wait=Wait(kind="approval", question=question, action=action),
            )
        if outside is not None and _unconfinable(ctx.sandbox):
            return ActionResult.blocked(f"refused {names}: {outside}; rerun with --sandbox off "
                                        f"to run programs unconfined")
        because = f" ({why})" if why else ""
        return ActionResult.blocked(
            f"refused {names}: it needs approval{because} and no one can give it in this "
            f"non-interactive run; allow it with `--approve yes` or an allow pattern such as "
            f"{_suggest(pending[0])!r} in [workflow.permissions]"
        )


class Question(str):
    """An approval question, with `detail`: what the action would change (a diff), or '';
    `always`: what an `always` answer lets through for the rest of the run."""

    detail: str
    always: str

    def __new__(cls, text: str, detail: str = "", always: str = "") -> Question:
        question = super().__new__(cls, text)
        question.detail = detail
        question.always = always
        return question


_COVERS = {"tool:edit": "every edit", "tool:write": "every write", "tool:test": "every test run",
           "tool:spawn": "every spawn", "tool:mcp": "every MCP tool call"}


def covers(keys: list[str]) -> str:
    """What `always` remembers for these parts, in words: `every edit`, `every `rm` command`."""
    said = [_COVERS.get(key, f"every `{key.removeprefix('tool:')}` command") for key in keys]
    return " and ".join(dict.fromkeys(said)) + " in this run"


def _shown(detail: Callable[[], str] | None) -> str:
    """What the action would change, or why it cannot; '' when the tool cannot say."""
    if detail is None:
        return ""
    try:
        return detail()
    except NormalizeError as exc:
        return f"(as written it would fail: {exc})"
    except OSError as exc:
        return f"(as written it would fail: {exc.strerror or exc})"


def _why(pending: list[_Part], outside: str | None) -> str:
    """What makes these parts need a person: leaving the boundary, or destroying work."""
    if outside is not None and any(part.kind == "outside" for part in pending):
        return outside
    if any(part.kind == "destructive" for part in pending):
        return "it deletes or discards work in the workspace"
    if any(part.kind == "mcp" for part in pending):
        return "its MCP server does not mark it read-only"
    return ""


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
