"""Agent Skills on the command line: `skills check` agrees with the reference validator,
project skills count only when trusted, and the catalog stays within its cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_helpers import cli

from normalize.skills import Skill, check
from normalize.skills.catalog import (
    CATALOG_CHARS,
    CATALOG_FLOOR,
    Catalog,
    catalog_cap,
    context_tokens,
)

skills_ref = pytest.importorskip("skills_ref")  # the `test` extra installs it

LONG = "x" * 1025
SKILLS = {  # directory name -> SKILL.md; the first four are valid
    "pdf-forms": "---\nname: pdf-forms\ndescription: Fill PDF forms with pdftk.\n---\n# Use\n",
    "release": ("---\nname: release\ndescription: >\n  Cut a release: bump, tag,\n  publish.\n"
                "license: MIT\nmetadata:\n  author: ops\n  version: \"1.2\"\n---\nSteps.\n"),
    "db-migrate": ("---\nname: db-migrate\ndescription: 'Run migrations, then check them.'\n"
                   "compatibility: needs psql\nallowed-tools: Bash(psql:*) Read\n---\nBody\n"),
    "ünïcode-ok": "---\nname: ünïcode-ok\ndescription: Letters beyond ASCII are allowed.\n---\n",
    "Upper": "---\nname: Upper\ndescription: A capital letter.\n---\n",
    "mismatch": "---\nname: other-name\ndescription: Not its directory.\n---\n",
    "double--hyphen": "---\nname: double--hyphen\ndescription: Two hyphens.\n---\n",
    "no-description": "---\nname: no-description\n---\nBody\n",
    "no-front-matter": "# Just markdown\nname: no-front-matter\n",
    "unclosed": "---\nname: unclosed\ndescription: never closed\n",
    "extra-field": "---\nname: extra-field\ndescription: Has more.\nversion: 2\n---\n",
    "too-long": f"---\nname: too-long\ndescription: {LONG}\n---\n",
}


def write_skill(base: Path, name: str, text: str) -> Path:
    directory = base / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(text, encoding="utf-8")
    return directory


def test_check_agrees_with_the_reference_validator(tmp_path: Path) -> None:
    base = tmp_path / "skills"
    verdicts = {}
    for name, text in SKILLS.items():
        directory = write_skill(base, name, text)
        verdicts[name] = (not check(directory), not skills_ref.validate(directory))
    assert all(ours == theirs for ours, theirs in verdicts.values()), verdicts
    assert sum(ok for ok, _ in verdicts.values()) == 4

    done = cli("skills", "check", str(base), cwd=tmp_path, home=tmp_path / "home")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"{base / 'mismatch' / 'SKILL.md'}:2: `name` 'other-name' must equal its " \
           "directory's name 'mismatch'" in lines
    assert f"{base / 'extra-field' / 'SKILL.md'}:4: unknown field `version` (the " \
           "specification allows name, description, license, compatibility, metadata, " \
           "allowed-tools)" in lines
    assert f"{base / 'too-long' / 'SKILL.md'}:3: `description` is 1025 characters; at " \
           "most 1024" in lines
    assert f"ok {base / 'release'}" in lines
    one = cli("skills", "check", str(base / "pdf-forms" / "SKILL.md"), cwd=tmp_path,
              home=tmp_path / "home")
    assert one.returncode == 0 and one.stdout == f"ok {base / 'pdf-forms'}\n"


def test_project_skills_count_only_when_trusted(tmp_path: Path) -> None:
    root, home = tmp_path / "proj", tmp_path / "home"
    skill = write_skill(root / ".agents" / "skills", "pdf-forms", SKILLS["pdf-forms"])
    listed = cli("skills", "list", "--json", cwd=root, home=home)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    (said,) = listed.stderr.splitlines()
    assert said.startswith("normalize: ignored 1 project skill(s) (pdf-forms): untrusted "
                           "workspace files; `normalize trust")
    trusted = cli("trust", str(skill / "SKILL.md"), cwd=root, home=home)
    assert trusted.returncode == 0, trusted.stderr
    listed = cli("skills", "list", "--json", cwd=root, home=home)
    assert [(s["name"], s["scope"]) for s in json.loads(listed.stdout)] == [
        ("pdf-forms", "project")]
    assert listed.stderr == ""
    shown = cli("skills", "show", "pdf-forms", cwd=root, home=home)
    assert shown.returncode == 0 and "# Use" in shown.stdout
    missing = cli("skills", "show", "nope", cwd=root, home=home)
    assert missing.returncode == 2 and "no skill 'nope' here (known: pdf-forms)" in \
        missing.stderr


def test_the_catalog_of_200_skills_stays_within_its_cap(tmp_path: Path) -> None:
    catalog = Catalog({f"skill-{n:03d}": Skill(
        f"skill-{n:03d}", f"Use when the task is about topic {n}: " + "detail " * 60,
        tmp_path / f"skill-{n:03d}" / "SKILL.md") for n in range(200)})
    section = catalog.section()
    assert len(section) <= CATALOG_CHARS
    assert section.startswith("## Skills\n") and "- skill-000: Use when the task" in section
    assert "more (the catalog is full" in section
    assert Catalog().section() == ""  # no skills: no section at all
    few = Catalog({"a-b": Skill("a-b", "Short.", tmp_path / "a-b" / "SKILL.md")})
    assert few.section().endswith("- a-b: Short.\n")


def test_the_cap_is_a_share_of_the_window_within_a_floor_and_a_ceiling() -> None:
    assert context_tokens("anthropic:claude-sonnet-4-5") == 200_000
    assert context_tokens("openai:gpt-4o-mini") == 128_000
    assert context_tokens("openai:my-local-model") == 32_000  # unknown: a small window
    assert catalog_cap("anthropic:claude-sonnet-4-5") == CATALOG_CHARS  # 16,000: the ceiling
    assert catalog_cap("openai:my-local-model") == 2_560  # 2% of 32k tokens, 4 chars each
    assert catalog_cap("openai:qwen2.5-coder") == 2_560
    assert catalog_cap("ollama:tiny") == 2_560
    assert catalog_cap("openai:my-local-model", 8_192) == CATALOG_FLOOR  # 655: the floor
    assert catalog_cap("openai:my-local-model", 64_000) == 5_120  # the workflow's window
