"""Exit statuses that agree (issue 25), and the paths a person pastes, each as they see it.

2: what was asked is wrong (a missing file, a bad regex, a bad workspace, a data home
that is a file); 1: grep found nothing; 0: a reader that leaves early (`| head -1`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import cli

DEMO = ('[workflow]\nname = "demo"\n\n[[workflow.steps]]\nname = "look"\n'
        'action = "view calc.py"\n')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "demo.toml").write_text(DEMO)
    return root


def test_a_missing_file_is_2_from_view_and_skeleton_as_from_run(
        project: Path, normalize_home: Path) -> None:
    for verb in ("view", "skeleton", "run"):
        done = cli(verb, "nope.toml", cwd=project, home=normalize_home)
        assert done.returncode == 2, (verb, done.stderr)
        assert "nope.toml" in done.stderr and "Traceback" not in done.stderr


def test_an_invalid_regex_is_2_not_1_like_no_match(project: Path, normalize_home: Path) -> None:
    bad = cli("grep", "[a", cwd=project, home=normalize_home)
    assert bad.returncode == 2 and "invalid regex '[a'" in bad.stderr
    assert cli("grep", "not_here_at_all", cwd=project, home=normalize_home).returncode == 1


def test_a_workspace_that_is_no_directory_is_blamed_not_the_file(
        project: Path, tmp_path: Path, normalize_home: Path) -> None:
    gone = cli("view", "-w", str(tmp_path / "nonexistent"), "calc.py", cwd=project,
               home=normalize_home)
    assert gone.returncode == 2
    assert gone.stderr.splitlines() == [
        f"normalize: error: --workspace {tmp_path / 'nonexistent'}: no such directory"]


def test_view_takes_an_absolute_path_inside_the_workspace(project: Path,
                                                          normalize_home: Path) -> None:
    pasted = cli("view", str(project / "calc.py"), cwd=project, home=normalize_home)
    assert pasted.returncode == 0, pasted.stderr
    assert "def add(a, b):" in pasted.stdout
    symbol = cli("skeleton", str(project / "calc.py"), cwd=project, home=normalize_home)
    assert symbol.returncode == 0 and "def add" in symbol.stdout
    outside = cli("view", "/etc/hostname", cwd=project, home=normalize_home)
    assert outside.returncode == 2 and "refused '/etc/hostname'" in outside.stderr


def test_a_data_home_that_is_a_file_is_a_configuration_error(
        project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a directory\n")
    done = cli("run", "demo.toml", "-q", cwd=project, home=home)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"normalize: error: NORMALIZE_HOME={home}: {home} is not a directory; point "
        "NORMALIZE_HOME at a directory you can write"]
    below = cli("run", "demo.toml", "-q", cwd=project, home=home / "sub")
    assert below.returncode == 2 and f"({home} is not a directory)" in below.stderr
    assert "File exists" not in done.stderr + below.stderr


@pytest.mark.parametrize("args", [["plugins"], ["map", "."], ["tasks"], ["view", "calc.py"],
                                  ["tasks", "show", "last", "--full"], ["help", "commands"]])
def test_a_reader_that_leaves_early_is_no_failure(args: list[str], project: Path,
                                                  normalize_home: Path) -> None:
    assert cli("run", "demo.toml", "-q", cwd=project, home=normalize_home).returncode == 0
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home), "TERM": "dumb"}
    env.pop("NORMALIZE_CRASH_AT", None)
    proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", *args], cwd=project,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line: every write fails
    with proc.stderr:
        said = proc.stderr.read()
    assert (proc.wait(timeout=60), said) == (0, b"")


def test_check_without_tests_is_no_pass(project: Path, normalize_home: Path) -> None:
    done = cli("run", "check", cwd=project, home=normalize_home)
    assert done.returncode == 1, done.stdout + done.stderr  # a CI gate: "no tests" is no "pass"
    assert "tests pass" not in done.stdout
    assert "no tests found: nothing was checked" in done.stdout
    assert "  – test  (" in done.stdout and "✓ test" not in done.stdout


def test_health_marks_tests_that_did_not_run_as_skipped(project: Path,
                                                        normalize_home: Path) -> None:
    done = cli("run", "health", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    assert "  – test --quick  (" in done.stdout and "✓ test" not in done.stdout
    assert "tests: no tests to run" in done.stdout


def test_check_where_pytest_collects_nothing_is_no_pass(project: Path,
                                                        normalize_home: Path) -> None:
    (project / "pytest.ini").write_text("[pytest]\n")
    done = cli("run", "check", cwd=project, home=normalize_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no tests found: nothing was checked" in done.stdout


def test_a_directory_of_one_file_says_1_file(project: Path, normalize_home: Path) -> None:
    (project / "one").mkdir()
    (project / "one" / "only.py").write_text("x = 1\n")
    done = cli("view", "one", cwd=project, home=normalize_home)
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "one/ (1 file)"
