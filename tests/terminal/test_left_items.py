"""What a person still ran into after the majors (issue 25's minors), each as they see it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    full.update(NORMALIZE_HOME=str(home), TERM="dumb", **env)
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd,
                          env=full, capture_output=True, text=True, timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "shapes.py").write_text(
        "class Shape:\n    \"\"\"A shape.\"\"\"\n\n    def area(self) -> float:\n"
        "        return 0.0\n\n    class Unit:\n        def name(self) -> str:\n"
        "            return 'm'\n\n\ndef make(kind: str) -> Shape:\n    return Shape()\n")
    return tmp_path


def test_skeleton_json_returns_symbols_not_one_text_field(project: Path,
                                                          normalize_home: Path) -> None:
    done = cli("skeleton", "--json", "shapes.py", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    symbols = json.loads(done.stdout)["symbols"]
    assert [(s["name"], s["kind"], s["lines"]) for s in symbols] == [
        ("Shape", "class", [1, 9]), ("make", "function", [12, 13])]
    shape = symbols[0]
    assert shape["signature"] == "class Shape:" and shape["doc"] == "A shape."
    assert [c["name"] for c in shape["children"]] == ["area", "Unit"]
    assert shape["children"][1]["children"][0]["name"] == "name"
    assert shape["children"][0]["signature"] == "def area(self) -> float:"
    tree = json.loads(cli("skeleton", "--json", ".", cwd=project, home=normalize_home).stdout)
    assert tree["symbols"][0]["path"] == "shapes.py"
    assert tree["symbols"][0]["symbols"] == symbols
