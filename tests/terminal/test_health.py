"""`run health` and `run check` as a person reads them: verdicts, first failures, bounds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def normalize(*args: str, cwd: Path, home: Path,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    full.update({"NORMALIZE_HOME": str(home), "TERM": "dumb", **(env or {})})
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd,
                          env=full, capture_output=True, text=True, timeout=120)


def project(root: Path, test: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests" / "test_calc.py").write_text(test)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return root


FAILING = ("from calc import add\n\n\ndef test_ok():\n    assert True\n\n\n"
           "def test_add():\n    assert add(1, 2) == 3\n")


def test_run_check_prints_the_failing_tests_assertion(tmp_path: Path,
                                                      normalize_home: Path) -> None:
    repo = project(tmp_path / "p", FAILING)
    proc = normalize("run", "check", cwd=repo, home=normalize_home)
    assert proc.returncode == 1, proc.stderr
    assert "tests/test_calc.py::test_add - assert -1 == 3" in proc.stdout, proc.stdout
    assert "tests fail; the first failure is shown above" in proc.stdout


def test_health_says_why_the_tests_cannot_be_collected(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    repo = project(tmp_path / "p", "def test_ok():\n    assert True\n")
    (repo / "tests" / "conftest.py").write_text("import not_installed_anywhere\n")
    proc = normalize("run", "health", cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert ("tests: tests cannot be collected: ModuleNotFoundError: No module named "
            "'not_installed_anywhere'") in proc.stdout, proc.stdout
    assert "exit status 4" not in proc.stdout.splitlines()[-1]


def test_health_uses_the_projects_venv_and_says_when_it_lacks_pytest(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = project(tmp_path / "p", "def test_ok():\n    assert True\n")
    venv = repo / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    proc = normalize("run", "health", cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert "tests: tests not run: pytest is not installed in the project's .venv " \
           "(.venv/bin/python -m pip install pytest)" in proc.stdout, proc.stdout
    assert "errors" not in proc.stdout


def test_a_quick_test_run_is_bounded_and_reports_what_finished(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = project(tmp_path / "p", "import time\n\n\ndef test_a():\n    pass\n\n\n"
                   "def test_b():\n    pass\n\n\ndef test_slow():\n    time.sleep(120)\n")
    flow = tmp_path / "quick.toml"
    flow.write_text('[workflow]\nname = "quick"\n\n[[workflow.steps]]\nname = "tests"\n'
                    'action = "test --quick"\ntimeout = 12\ncapture = "tests"\n'
                    '\n[[workflow.steps]]\nname = "end"\naction = "done {tests}"\n')
    proc = normalize("run", str(flow), cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 12 s: time for pytest to start and pass two tests on a busy machine; the third never ends
    assert "pytest: 2 passed in the first 12s (a quick run stops there; `normalize test` " \
           "runs them all)" in proc.stdout, proc.stdout

