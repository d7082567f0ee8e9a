"""Helpers for the spine tests: running the CLI in a subprocess, sample repositories."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from support.cli import cli as run_cli

REPO = Path(__file__).resolve().parents[2]


cli = partial(run_cli, term=None)
"""`normalize ARGS` in a subprocess, as a user would (`support.cli`)."""


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def make_sample_repo(root: Path, *, with_tests: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
        "def mean(xs: list[int]) -> float:\n    # TODO: empty lists\n"
        "    return sum(xs) / len(xs)\n",
    )
    if with_tests:
        (root / "tests").mkdir()
        (root / "tests" / "test_calc.py").write_text(
            "from calc import add, mean\n\n\n"
            "def test_add() -> None:\n    assert add(1, 2) == 3\n\n\n"
            "def test_mean() -> None:\n    assert mean([1, 2, 3]) == 2\n",
        )
        (root / "pyproject.toml").write_text(
            "[tool.pytest.ini_options]\npythonpath = [\".\"]\n")
    return root
