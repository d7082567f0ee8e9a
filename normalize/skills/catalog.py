"""The skills a run may use, and their catalog in the model's cached prompt.

Project skills come from `.agents/skills/`, `.normalize/skills/` and
`.claude/skills/` in the workspace and each directory above it up to the
repository's root (the nearest wins); user skills from `~/.agents/skills/`
and `skills/` in normalize's config directory. A project skill is a file
the model or a commit could have written, so it counts only when `normalize
trust` vouches for its SKILL.md (the workspace workflows' rule); the others
are left out with one line. A project skill of a user skill's name shadows
it, said once. At most `MAX_SKILLS` skills, one directory level deep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from normalize.skills import Skill, load

PROJECT_DIRS = (".agents/skills", ".normalize/skills", ".claude/skills")
MAX_SKILLS = 500
CATALOG_CHARS = 8_000
"""The catalog's ceiling in characters (about 2,000 tokens), whatever the window."""
CATALOG_FLOOR = 1_200
"""The least room the catalog gets, however small the window (about 300 tokens)."""
CATALOG_SHARE = 0.02  # of the model's context window, as the specification's guide suggests
CHARS_PER_TOKEN = 4
CONTEXT_TOKENS = (("claude", 200_000), ("gpt-4.1", 1_000_000), ("gpt-5", 400_000),
                  ("gpt-4o", 128_000), ("o1", 200_000), ("o3", 200_000), ("o4", 200_000),
                  ("gemini", 1_000_000), ("deepseek", 128_000), ("qwen", 32_000),
                  ("llama", 128_000), ("mistral", 32_000))
"""Context windows by model-name prefix (tokens); the first prefix that matches wins."""
DEFAULT_CONTEXT_TOKENS = 32_000
"""A model the table does not know (a local one, say; a scripted one): a small window."""
SHORTEST = 60  # a description is cut to no less than this before skills are left out


@dataclass
class Catalog:
    """The usable skills by name, and what was said while finding them."""

    skills: dict[str, Skill] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)

    def get(self, name: str) -> Skill | None:
        return self.skills.get(name)

    def section(self, cap: int = CATALOG_CHARS,
                locate: Callable[[Skill], str] | None = None) -> str:
        """The catalog for the system prompt, within `cap` characters ('' when there are none):
        descriptions are shortened first, then the last skills are left out (and counted).
        With `locate` (a harness that reads files itself), each line names the skill's file
        and the model is told to read it instead of `skill NAME`."""
        if not self.skills:
            return ""
        how = ("read that skill's file (named after it) before you start" if locate else
               "load that skill's instructions with `skill NAME` before you start")
        head = ("## Skills\nInstructions the user installed (Agent Skills), by name and when "
                f"to use each. When the task matches a description, {how} (once is "
                "enough).\n")
        skills = sorted(self.skills.values(), key=lambda s: s.name)
        room = cap - len(head)
        width = max(len(s.description) for s in skills)
        while width > SHORTEST and _size(skills, width, locate) > room:
            width = max(SHORTEST, width * 3 // 4)
        lines = [_line(s, width, locate) for s in skills]
        if sum(map(len, lines)) <= room:
            return head + "".join(lines)
        room -= len(_tail(len(lines)))
        shown: list[str] = []
        for line in lines:
            if sum(map(len, shown)) + len(line) > room:
                break
            shown.append(line)
        return head + "".join(shown) + _tail(len(lines) - len(shown))


def context_tokens(model: str) -> int:
    """The context window of `model` (`PROVIDER:MODEL` or a bare name), as far as the table
    knows (`CONTEXT_TOKENS`; else `DEFAULT_CONTEXT_TOKENS`)."""
    name = model.rpartition(":")[2].rpartition("/")[2].lower()
    return next((tokens for prefix, tokens in CONTEXT_TOKENS if name.startswith(prefix)),
                DEFAULT_CONTEXT_TOKENS)


def catalog_cap(model: str, window: int | None = None) -> int:
    """The catalog's cap for `model` (whose context window is `window` tokens, when the
    workflow says): about 2% of the window in characters, within `CATALOG_FLOOR` and
    `CATALOG_CHARS`."""
    share = int((window or context_tokens(model)) * CATALOG_SHARE * CHARS_PER_TOKEN)
    return max(CATALOG_FLOOR, min(CATALOG_CHARS, share))


def _tail(left: int) -> str:
    return f"- … and {left} more (the catalog is full: `normalize skills list` shows all)\n"


def _line(skill: Skill, width: int, locate: Callable[[Skill], str] | None = None) -> str:
    text = skill.description
    if len(text) > width:
        text = text[: width - 1].rstrip() + "…"
    where = f" (`{locate(skill)}`)" if locate is not None else ""
    return f"- {skill.name}: {text}{where}\n"


def _size(skills: list[Skill], width: int, locate: Callable[[Skill], str] | None) -> int:
    return sum(len(_line(s, width, locate)) for s in skills)


def _roots(workspace: Path) -> list[Path]:
    """The workspace and each directory above it up to the repository's root (nearest first)."""
    here = workspace.resolve()
    chain = [here]
    for parent in here.parents:
        if (chain[-1] / ".git").exists():
            break
        chain.append(parent)
    return chain if (chain[-1] / ".git").exists() else [here]


def _found(base: Path) -> list[Path]:
    if not base.is_dir() or base.is_symlink():
        return []
    try:
        children = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    return [p for p in children if (p / "SKILL.md").is_file()][:MAX_SKILLS]


def project_skill_dirs(workspace: Path) -> list[Path]:
    """Every project skill directory, nearest first."""
    return [d for root in _roots(workspace) for sub in PROJECT_DIRS for d in _found(root / sub)]


def user_skill_dirs(config_dir: Path | None, home: Path | None) -> list[Path]:
    bases = [home / ".agents" / "skills"] if home is not None else []
    bases += [config_dir / "skills"] if config_dir is not None else []
    return [d for base in bases for d in _found(base)]


def discover(workspace: Path, *, config_dir: Path | None, home: Path | None,
             trusted: Callable[[Path], bool]) -> Catalog:
    """The skills a run in `workspace` may use (see the module docstring)."""
    catalog = Catalog()
    users: dict[str, Skill] = {}
    for directory in user_skill_dirs(config_dir, home):
        skill, warnings = load(directory, "user")
        catalog.notices += warnings
        if skill is not None and skill.name not in users:
            users[skill.name] = skill
    untrusted: list[Path] = []
    for directory in project_skill_dirs(workspace):
        if len(catalog.skills) >= MAX_SKILLS:
            catalog.notices.append(f"skills: more than {MAX_SKILLS}; the rest are left out")
            break
        if not trusted(directory / "SKILL.md"):
            untrusted.append(directory)
            continue
        skill, warnings = load(directory, "project")
        catalog.notices += warnings
        if skill is None or skill.name in catalog.skills:
            continue
        if skill.name in users:
            catalog.notices.append(f"skill {skill.name}: the project's ({skill.file}) shadows "
                                   f"yours ({users[skill.name].file})")
        catalog.skills[skill.name] = skill
    for name, skill in users.items():
        catalog.skills.setdefault(name, skill)
    if untrusted:
        first = untrusted[0] / "SKILL.md"
        catalog.notices.append(
            f"ignored {len(untrusted)} project skill(s) ({', '.join(d.name for d in untrusted)}"
            f"): untrusted workspace files; `normalize trust {first}` lets one count")
    return catalog
