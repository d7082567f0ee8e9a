"""The README's first command, as a new user runs it: a fresh clone, a fresh venv, green.

Slow (one virtualenv and one `pip install -e .`, shared by both checks). pip
installs as the machine is configured (its local indexes, wheel dir and cache).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST = re.compile(r"```sh\n(python3 -m venv \.venv && [^\n]*normalize run health)\n```")


def first_command() -> str:
    found = FIRST.search((REPO / "README.md").read_text(encoding="utf-8"))
    assert found is not None, "the README's first command block is gone"
    return found.group(1)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "NORMALIZE_CRASH_AT", "PYTHONPATH")}
    env["NORMALIZE_HOME"] = str(home)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    return env


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path,
                                                                  subprocess.CompletedProcess[str]]:
    """A fresh clone of this repository where the README's first command has run."""
    root = tmp_path_factory.mktemp("first")
    clone, home = root / "normalize", root / "home"
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)
    proc = subprocess.run(["bash", "-c", first_command()], cwd=clone, env=_env(home),
                          capture_output=True, text=True, timeout=600)
    return clone, home, proc


def test_the_first_command_ends_green_on_a_fresh_clone(first_run: tuple[
        Path, Path, subprocess.CompletedProcess[str]]) -> None:
    _, _, proc = first_run
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown[-3000:]
    summary = shown[shown.rindex("tests: "):]
    assert "errors" not in shown.replace("is ignored", ""), summary
    assert "tests: " in shown and " done " in shown, shown[-2000:]
    # without the test extras the project's own .venv has no pytest, and health says so
    assert "tests: tests not run: pytest is not installed in the project's .venv" in summary


def test_the_first_commands_normalize_is_green_on_a_small_project(
        first_run: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    clone, home, _ = first_run
    project = tmp_path / "calc"
    (project / "tests").mkdir(parents=True)
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    proc = subprocess.run([str(clone / ".venv" / "bin" / "normalize"), "run", "health"],
                          cwd=project, env=_env(home), capture_output=True, text=True,
                          timeout=120)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    assert "errors" not in shown, shown
    # no environment of its own: normalize's interpreter (no pytest), then PATH's pytest
    assert "tests: 1 passed" in shown or "tests: tests not run: pytest is not installed" \
        in shown, shown
