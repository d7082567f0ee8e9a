"""A skill's `allowed-tools`: what it pre-approves while it is loaded, and what it cannot.

The specification calls the field "pre-approved tools" (experimental) and
writes it in Claude Code's words: `Bash(git:*) Bash(npm run test) Read Edit`.
normalize reads those words as what its approval policy lets through without
asking, in `ask` mode, while the skill is loaded in the task:

| `allowed-tools` entry            | pre-approves                                         |
|----------------------------------|------------------------------------------------------|
| `Bash(git:*)`, `Bash(git diff:*)`| a `run` part whose words start with those words      |
| `Bash(npm run test)`             | a `run` part that is exactly that command            |
| `Bash(make *)`                   | a `run` part matching the pattern (program named)    |
| `Edit`, `MultiEdit`, `Write`     | `edit` / `write` (`Edit(docs/*)`: of matching paths) |
| `Read`, `Grep`, `Glob`, `LS`     | nothing to do: reading never asks                    |
| `Bash`, `Bash(*)`, anything else | nothing: said once, as too broad or not normalize's  |

A grant is only ever a yes a person would otherwise be asked for about a
command the sandbox confines: the approval policy still refuses what a
`deny` pattern names and command substitution, still asks the person about a
destructive command and about one leaving the sandbox (network, `--sandbox
off`, no sandbox here), and `never` still refuses (see
`normalize.tools.approval`). Only skills the run found usable grant: yours,
and a project's only once `normalize trust` vouched for its content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from normalize.skills.catalog import Catalog

__all__ = ["Grant", "parse_allowed_tools", "pre_approver"]

READING = frozenset({"Read", "Grep", "Glob", "LS"})
EDITING = {"Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit", "Write": "write"}
_ENTRY_RE = re.compile(r"([A-Za-z_][\w-]*)(?:\(([^)]*)\))?")
_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class Grant:
    """One pre-approval of a loaded skill: a verb, and which of its commands or paths."""

    skill: str
    tool: str  # "run", "edit" or "write"
    words: tuple[str, ...] = ()  # `run`: the command's first words (`Bash(git diff:*)`)
    pattern: str = ""  # `run`: the command; `edit`/`write`: the path ('' any, with no words)
    written: str = ""  # the entry as the skill wrote it

    def covers(self, tool: str, words: list[str]) -> bool:
        """Whether this grant lets `words` (a `run` part's, or `[tool, path, …]`) through."""
        if tool != self.tool or not words:
            return False
        if tool == "run":
            if self.words:
                return tuple(words[: len(self.words)]) == self.words
            return fnmatchcase(" ".join(words), self.pattern)
        path = words[1] if len(words) > 1 else ""
        return not self.pattern or fnmatchcase(path, self.pattern)

    def __str__(self) -> str:
        if self.tool == "run":
            shown = " ".join(self.words) + " …" if self.words else self.pattern
            return f"run `{shown}`"
        return f"{self.tool} {self.pattern}".rstrip() if self.pattern else f"every {self.tool}"


def _entries(value: object) -> list[tuple[str, str | None]]:
    """The `(Tool, argument)` entries of the field: space-delimited text or a YAML list."""
    items = value if isinstance(value, list) else [value]
    found: list[tuple[str, str | None]] = []
    for item in items:
        text = str(item)
        for match in _ENTRY_RE.finditer(text):
            found.append((match.group(1), match.group(2)))
    return found


def _bash(skill: str, argument: str | None, written: str) -> Grant | str:
    """A grant for `Bash(…)`, or why there is none (a bare `Bash` names no program)."""
    spec = (argument or "").strip()
    if spec.endswith(":*"):
        words = tuple(spec[:-2].split())
        if words and not any(_GLOB & set(w) for w in words):
            return Grant(skill, "run", words=words, written=written)
    elif spec and not _GLOB & set(spec.split()[0]):
        return Grant(skill, "run", pattern=" ".join(spec.split()), written=written)
    return (f"`{written}` names no program (every command is too broad to pre-approve: "
            "write `Bash(PROGRAM:*)`)")


def parse_allowed_tools(skill: str, value: object) -> tuple[list[Grant], list[str]]:
    """The grants of skill `skill`'s `allowed-tools` and one line per entry that grants
    nothing (see the module docstring's table)."""
    grants: list[Grant] = []
    problems: list[str] = []
    for tool, argument in _entries(value):
        written = f"{tool}({argument})" if argument is not None else tool
        if tool == "Bash":
            made = _bash(skill, argument, written)
            if isinstance(made, str):
                problems.append(made)
            else:
                grants.append(made)
        elif tool in EDITING:
            grants.append(Grant(skill, EDITING[tool], pattern=(argument or "").strip(),
                                written=written))
        elif tool not in READING:
            problems.append(f"`{written}` is not a tool normalize pre-approves (Bash(…), Edit, "
                            "Write; reading never asks)")
    return grants, problems


def pre_approver(catalog: Catalog | None, granted: list[Grant]
                 ) -> Callable[[str], list[str]] | None:
    """What the run lends its driver to call as a skill loads: the skill's grants join
    `granted` (the approval policy's), and it returns the lines to say (none: nothing new).
    None when no skill the run found has `allowed-tools`."""
    if catalog is None or not any("allowed-tools" in s.fields for s in catalog.skills.values()):
        return None

    def pre_approve(name: str) -> list[str]:
        skill = catalog.get(name)
        if skill is None or "allowed-tools" not in skill.fields:
            return []
        grants, problems = parse_allowed_tools(name, skill.fields["allowed-tools"])
        fresh = [grant for grant in grants if grant not in granted]
        granted.extend(fresh)
        said = [f"skill {name}: allowed-tools {problem}" for problem in problems]
        if fresh:
            said.insert(0, f"skill {name} pre-approves {', '.join(map(str, fresh))} while it is "
                           "loaded (in ask mode; deny patterns, destructive commands and the "
                           "sandbox still hold)")
        return said

    return pre_approve
