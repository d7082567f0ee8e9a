"""The plain (CI) view shows what matters: a failed command's last lines, a success's gist."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cli_helpers import NORMALIZE, cli_env

FLOW = """[workflow]
name = "ci"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "tests"
action = "test"
[[workflow.steps]]
name = "build"
action = "run python3 build.py"
"""
BUILD = ('import sys\nprint("compiling 3 modules")\n'
         'sys.stderr.write("error: mod2.c: missing semicolon\\n")\nsys.exit(2)\n')


def test_a_ci_log_shows_test_counts_and_why_a_command_failed(tmp_path: Path) -> None:
    (tmp_path / "ci.toml").write_text(FLOW)
    (tmp_path / "build.py").write_text(BUILD)
    (tmp_path / "test_ok.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    proc = subprocess.run([*NORMALIZE, "run", "ci.toml"], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    tests = next(line for line in lines if line.startswith("  ✓ test"))
    assert tests.endswith("pytest: 2 passed")
    at = next(i for i, line in enumerate(lines) if line.startswith("  ✗ run python3 build.py"))
    assert lines[at + 1:at + 4] == ["      exit status 2", "      compiling 3 modules",
                                    "      error: mod2.c: missing semicolon"]


def test_a_one_step_workflow_ends_in_good_english(tmp_path: Path) -> None:
    (tmp_path / "one.toml").write_text('[workflow]\nname = "one"\n[[workflow.steps]]\n'
                                       'name = "look"\naction = "view one.toml"\n')
    proc = subprocess.run([*NORMALIZE, "run", "one.toml"], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "  its one step finished"


def test_an_action_approved_on_resume_is_counted_once(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(
        '[workflow]\nname = "a"\n[[workflow.steps]]\nname = "one"\naction = "view a.toml"\n'
        '[[workflow.steps]]\nname = "two"\naction = "run echo hi"\n'
        '[[workflow.steps]]\nname = "three"\naction = "view a.toml"\n')

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*NORMALIZE, *args], cwd=tmp_path, env=cli_env(),
                              capture_output=True, text=True, timeout=60, check=False)

    asked = cli("run", "a.toml", "--approve", "ask")
    assert asked.returncode == 4, asked.stdout + asked.stderr
    assert " waiting · 2 turns · 1 action · " in asked.stdout  # the one that ran
    answered = cli("resume", "last", "--answer", "yes")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert " done · 5 turns · 3 actions in all · " in answered.stdout  # view, run, view


def test_viewing_a_big_file_reads_as_words_not_the_models_commands(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("".join(f"def f{n}():\n    return {n}\n\n"
                                             for n in range(500)))
    (tmp_path / "v.toml").write_text('[workflow]\nname = "v"\n[[workflow.steps]]\n'
                                     'name = "look"\naction = "view big.py"\n')
    proc = subprocess.run([*NORMALIZE, "run", "v.toml"], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    viewed = next(line for line in proc.stdout.splitlines() if "✓ view big.py" in line)
    assert viewed.endswith("big.py: 1,500 lines; showing the outline")
    assert "Use view" not in proc.stdout
