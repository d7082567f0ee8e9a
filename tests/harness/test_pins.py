"""The versions the harness adapters say they are tested with are the ones `scripts/test` installs
(`.ci/run` runs it)."""

from __future__ import annotations

import pytest
from harness_support import REPO

from normalize.tools.harness import HARNESSES, harness_named
from normalize.tools.harness.agents import TESTED

PACKAGES = {"claude": "@anthropic-ai/claude-code@", "codex": "@openai/codex@",
            "aider": "aider-chat=="}


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_ci_installs_the_tested_version(name: str) -> None:
    ci = (REPO / "scripts" / "test").read_text()
    assert PACKAGES[name] + harness_named(name).tested_version in ci


def test_ci_installs_the_tested_acp_agents() -> None:
    ci = (REPO / "scripts" / "test").read_text()
    for package, version in TESTED.items():
        assert f"{package}@{version}" in ci
