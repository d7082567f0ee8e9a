"""A scripted model plays on across the visits of an `llm-decide` step (`run validate-fix`)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import cli

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return b * b\n"
TESTS = ("from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_mul():\n    assert mul(2, 3) == 6\n")


def fix(old: str, new: str) -> str:
    return (f"edit calc.py <<EOF\n<<<<<<< SEARCH\n    return {old}\n=======\n    return {new}\n"
            ">>>>>>> REPLACE\nEOF")


def test_each_visit_of_the_fixing_state_gets_the_next_reply(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(TESTS)
    script = tmp_path / "replies.json"  # one fix per visit: add first, then mul
    script.write_text(json.dumps([fix("a - b", "a + b"), "done fixed add",
                                  fix("b * b", "a * b"), "done fixed mul"]))
    proc = cli("run", "validate-fix", "--var", "target=test_calc.py", "--model",
               f"scripted:{script}", "--approve", "yes", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "calc.py").read_text() == CALC.replace("a - b", "a + b").replace(
        "b * b", "a * b")
    assert "the tests pass" in proc.stdout
