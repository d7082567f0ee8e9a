"""The quick loop, `pytest -m "not e2e"`, holds no test that starts a process: modules that do
are marked `e2e` (tests/conftest.py), and a test the marking missed fails, naming what it
started (this module starts pytest, so it is e2e itself)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SPAWNS = """import subprocess

import pytest


def test_quick_but_starts_a_program():
    subprocess.run(["true"], check=True)


@pytest.mark.e2e
def test_marked_and_starts_a_program():
    subprocess.run(["true"], check=True)


def test_quick_and_starts_nothing():
    assert sum([1, 2]) == 3
"""


def test_a_test_not_marked_e2e_that_starts_a_process_fails(tmp_path: Path) -> None:
    (tmp_path / "test_spawns.py").write_text(SPAWNS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "conftest", "-rE", "test_spawns.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "3 passed" in out and "1 error" in out  # the marked one and the one starting nothing
    assert ("test_spawns.py::test_quick_but_starts_a_program is not marked e2e but started a "
            "process (subprocess.Popen ('true', ['true'])") in out


def test_modules_are_marked_by_what_they_start(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("e2e") is not None  # it names subprocess
    marked = {item.path.relative_to(TESTS).as_posix(): item.get_closest_marker("e2e") is not None
              for item in request.session.items}
    expected = {"spine/test_run_cli.py": True,  # the CLI helper (tests/spine/helpers.py)
                "spine/test_walk.py": True,  # listed: git for checkpoints, through normalize
                "spine/test_engine.py": False}  # the engine in-process, with a scripted model
    assert {path: marked[path] for path in expected if path in marked} == \
        {path: want for path, want in expected.items() if path in marked}
