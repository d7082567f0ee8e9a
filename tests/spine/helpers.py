"""Helpers for the spine tests: running the CLI in a subprocess, sample repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path, home: Path, timeout: float = 60,
        env: dict[str, str] | None = None, input: str | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Run `normalize ARGS` in a subprocess, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    full_env.update({"NORMALIZE_HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd, env=full_env,
        capture_output=True, text=True, timeout=timeout, input=input,
    )


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
