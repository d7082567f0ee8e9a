"""Agent Skills (agentskills.io): a directory with a `SKILL.md`, found, checked and catalogued.

A skill is `NAME/SKILL.md`: YAML front matter (`name`, 1–64 lowercase letters,
digits and single hyphens, equal to the directory's name; `description`,
1–1024 characters; optional `license`, `compatibility` (≤ 500 characters),
`metadata` (a mapping), `allowed-tools`), then the instructions. `scripts/`,
`references/` and `assets/` beside it are its resources.

`check` validates one skill as the specification requires, each problem as
`FILE:LINE: message`. `discover` finds the skills a run may use, leniently:
a skill with a problem that does not hide what it is (a name that differs
from its directory, an unknown field) is loaded with one warning; one
without a name or description is skipped with one warning. The front
matter is read by a small reader of the YAML subset skills use (`key:
value`, quoted and block scalars, one nested mapping), so each problem has
its line.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_FILE_BYTES = 256 * 1024
RESOURCE_DIRS = ("scripts", "references", "assets")
MAX_RESOURCES = 50

_KEY_RE = re.compile(r"([A-Za-z0-9_-]+)\s*:(?:\s+(.*)|\s*)\Z")
_BLOCK_RE = re.compile(r"[>|][+-]?\d?\s*(#.*)?\Z")


@dataclass
class Problem:
    """One thing wrong with a SKILL.md, where it is."""

    file: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Skill:
    """A skill as found: its front matter, where it lives, whose it is."""

    name: str
    description: str
    file: Path  # its SKILL.md
    scope: str = "project"  # "project" (the workspace's) or "user"
    fields: dict[str, object] = field(default_factory=dict)
    body_line: int = 1  # where the instructions start
    digest: str = ""  # sha256 of SKILL.md's text as it was found: a copy is made only of that

    @property
    def directory(self) -> Path:
        return self.file.parent

    def body(self) -> str:
        """The instructions: SKILL.md after its front matter (read when activated)."""
        text = _read(self.file) or ""
        return "\n".join(text.splitlines()[self.body_line - 1:]).strip()

    def resources(self) -> list[str]:
        """Its files under scripts/, references/ and assets/ (relative; listed, never read)."""
        found: list[str] = []
        for sub in RESOURCE_DIRS:
            base = self.directory / sub
            if not base.is_dir() or base.is_symlink():
                continue
            for path in sorted(base.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    found.append(str(path.relative_to(self.directory)))
                if len(found) >= MAX_RESOURCES:
                    return found
        return found


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    return data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")


def _scalar(text: str) -> str:
    """A plain or quoted YAML scalar as its string (comments cut, quotes undone)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return bytes(text[1:-1], "utf-8").decode("unicode_escape", errors="replace") \
            if "\\" in text else text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return re.sub(r"\s+#.*\Z", "", text)


def front_matter(text: str, file: Path) -> tuple[dict[str, object], dict[str, int], int,
                                                 list[Problem]]:
    """The front matter's fields, the line of each, where the body starts, and its problems."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, {}, 1, [Problem(file, 1, "SKILL.md must start with YAML front matter (---)")]
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        return {}, {}, 1, [Problem(file, 1, "the front matter is not closed with a --- line")]
    values: dict[str, object] = {}
    where: dict[str, int] = {}
    problems: list[Problem] = []
    i = 1
    while i < end:
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        match = _KEY_RE.match(raw) if not raw[0].isspace() else None
        if match is None:
            problems.append(Problem(file, i + 1, f"not a `key: value` line: {raw.strip()[:60]}"))
            i += 1
            continue
        key, rest = match.group(1), (match.group(2) or "").strip()
        if key in where:
            problems.append(Problem(file, i + 1, f"`{key}` is given twice"))
        where[key] = i + 1
        block = _indented(lines, i + 1, end)
        i += 1 + len(block)
        values[key] = _value(rest, block)
    return values, where, end + 2, problems


def _value(rest: str, block: list[str]) -> object:
    """A key's value from the rest of its line and its indented lines: a block scalar
    (`|`, `>`), a plain or quoted scalar, a mapping of scalars, or a list of scalars."""
    if _BLOCK_RE.match(rest):
        kept = [b.strip() for b in block]
        return ("\n" if rest.startswith("|") else " ").join(kept).strip()
    if rest:
        return " ".join([_scalar(rest), *(b.strip() for b in block)]).strip()
    if any(_KEY_RE.match(b.strip()) for b in block):
        return {m.group(1): _scalar(m.group(2) or "") for b in block
                if (m := _KEY_RE.match(b.strip()))}
    if block and all(b.strip().startswith("- ") for b in block):
        return [_scalar(b.strip()[2:]) for b in block]
    return ""


def _indented(lines: list[str], start: int, end: int) -> list[str]:
    out = []
    for line in lines[start:end]:
        if line.strip() and not line[0].isspace():
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _name_problems(name: object, directory: str) -> list[str]:
    if not isinstance(name, str) or not name.strip():
        return ["`name` must be a non-empty string"]
    name = unicodedata.normalize("NFKC", name.strip())
    out = []
    if len(name) > MAX_NAME:
        out.append(f"`name` is {len(name)} characters; at most {MAX_NAME}")
    if name != name.lower():
        out.append(f"`name` {name!r} must be lowercase")
    if not all(c.isalnum() or c == "-" for c in name):
        out.append(f"`name` {name!r} may hold only letters, digits and hyphens")
    if name.startswith("-") or name.endswith("-") or "--" in name:
        out.append(f"`name` {name!r} cannot start or end with a hyphen or hold two in a row")
    if unicodedata.normalize("NFKC", directory) != name:
        out.append(f"`name` {name!r} must equal its directory's name {directory!r}")
    return out


def check(directory: Path) -> list[Problem]:
    """Every problem of the skill in `directory`, as the specification requires."""
    file = directory / "SKILL.md"
    if not directory.is_dir():
        return [Problem(directory, 0, "not a directory")]
    text = _read(file)
    if text is None:
        return [Problem(file, 0, "missing SKILL.md")]
    values, where, _, problems = front_matter(text, file)
    if not where and problems:
        return problems
    for key in values:
        if key not in FIELDS:
            problems.append(Problem(file, where[key], f"unknown field `{key}` (the "
                                    f"specification allows {', '.join(FIELDS)})"))
    for key in ("name", "description"):
        if key not in values:
            problems.append(Problem(file, 1, f"missing required field `{key}`"))
    if "name" in values:
        problems += [Problem(file, where["name"], m)
                     for m in _name_problems(values["name"], directory.name)]
    problems += [Problem(file, where[key], message) for key, message in _field_problems(values)]
    return sorted(problems, key=lambda p: p.line)


def _field_problems(values: dict[str, object]) -> list[tuple[str, str]]:
    """The optional and free-text fields' problems, each with its field."""
    out = []
    description = values.get("description")
    if "description" in values:
        if not isinstance(description, str) or not description.strip():
            out.append(("description", "`description` must be a non-empty string"))
        elif len(description) > MAX_DESCRIPTION:
            out.append(("description", f"`description` is {len(description)} characters; "
                                       f"at most {MAX_DESCRIPTION}"))
    compatibility = values.get("compatibility")
    if "compatibility" in values and (not isinstance(compatibility, str)
                                      or len(compatibility) > MAX_COMPATIBILITY):
        out.append(("compatibility", "`compatibility` must be a string of at most "
                                     f"{MAX_COMPATIBILITY} characters"))
    if "metadata" in values and not isinstance(values["metadata"], dict):
        out.append(("metadata", "`metadata` must be a mapping"))
    return out


def load(directory: Path, scope: str) -> tuple[Skill | None, list[str]]:
    """A skill read leniently for use: the skill (None: unusable) and one warning per problem."""
    file = directory / "SKILL.md"
    text = _read(file)
    if text is None:
        return None, []
    values, _, body_line, _ = front_matter(text, file)
    problems = check(directory)
    name, description = values.get("name"), values.get("description")
    if not isinstance(name, str) or not name.strip() or not isinstance(description, str) \
            or not description.strip():
        why = problems[0] if problems else f"{file}: no name or description"
        return None, [f"skill {directory.name} skipped: {why}"]
    skill = Skill(name=directory.name, description=" ".join(description.split()), file=file,
                  scope=scope, fields=values, body_line=body_line,
                  digest=hashlib.sha256(text.encode("utf-8")).hexdigest())
    return skill, [f"skill {directory.name}: {p}" for p in problems]
