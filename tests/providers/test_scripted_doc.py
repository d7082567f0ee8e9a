"""docs/scripted.md's example script fixes the example project through the real CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "scripted.md"


def test_the_documented_script_runs_as_the_page_says(tmp_path: Path, normalize_home: Path) -> None:
    page = DOC.read_text()
    example = re.search(r"```json\n(.*?)```", page, re.S)
    assert example is not None
    (tmp_path / "replies.json").write_text(example.group(1))
    assert len(json.loads(example.group(1))) == 5
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                           "    assert add(2, 3) == 5\n")
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home)}
    proc = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--model",
                           "scripted:replies.json", "--approve", "yes", "fix add in calc.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "calc.py").read_text().endswith("return a + b\n")
    assert "model call failed (overloaded)" in proc.stdout  # the error reply, retried
    assert "Fixed add; the tests pass" in proc.stdout


def test_a_script_too_short_says_where_to_add_replies_not_the_prompt(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "short.json").write_text('["view short.json"]')
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home)}
    proc = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--model",
                           "scripted:short.json", "look"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    said = proc.stdout + proc.stderr
    assert ("error: scripted model 'short' got call 2 but its script has 1 step(s): add "
            "replies in short.json for what the task asks next") in said
    assert "last message" not in said and "## " not in said  # no prompt dumped
