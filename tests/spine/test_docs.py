"""The README stays true: its test command is `.ci/run`'s, and its tables match the code."""

from __future__ import annotations

import re

from helpers import REPO

from normalize.errors import ExitStatus
from normalize.events import EVENT_TYPES
from normalize.prompts.instructions import NAMES, NESTED_NAME

README = (REPO / "README.md").read_text()


def test_readme_test_command_is_what_ci_runs() -> None:
    block = README.split("<!-- test command -->", 1)[1].split("```sh\n", 1)[1].split("```")[0]
    ci = (REPO / ".ci" / "run").read_text()
    ci_block = ci.split("# --- test command ---\n", 1)[1].split("# --- end ---")[0]
    assert block.strip().splitlines() == ci_block.strip().splitlines()


def test_readme_documents_every_event_type() -> None:
    section = README.split("The types and their own fields:", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|", section, re.M))
    names = {n for pair in documented for n in pair if n}
    assert names == set(EVENT_TYPES)


def test_readme_documents_every_exit_status() -> None:
    section = README.split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
    codes = {int(c) for c in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert codes == {int(s) for s in ExitStatus}


def test_readme_ci_recipe_is_the_example_file() -> None:
    recipe = README.split("## In CI", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    assert recipe == (REPO / "docs" / "ci-example.yml").read_text()


INSTRUCTION_NAMES = {*NAMES, NESTED_NAME}


def test_every_document_the_code_names_is_in_the_repository() -> None:
    """A docstring that says "see X.md" points at a file a reader can open."""
    package = REPO / "normalize"
    missing = []
    for module in sorted(package.rglob("*.py")):
        for name in set(re.findall(r"\b([\w./-]+\.md)\b", module.read_text())):
            if name in INSTRUCTION_NAMES:  # read from a user's workspace, not a doc of ours
                continue
            if name.rsplit("/", 1)[-1] == "SKILL.md":  # an Agent Skill's file, likewise
                continue
            candidates = [REPO / name, REPO / "docs" / name, module.parent / name,
                          package / name]
            if not any(c.is_file() for c in candidates):
                missing.append(f"{module.relative_to(REPO)}: {name}")
    assert not missing
