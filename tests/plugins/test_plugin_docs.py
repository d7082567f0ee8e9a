"""docs/plugins.md stays true: it shows the example in full, names all it uses, and runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import normalize
from normalize import RunOptions, load_spec, run_task, start_task
from normalize.contract.driver import Driver
from normalize.plugins import use_entry_points

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs" / "plugins.md").read_text()
EXAMPLE = REPO / "docs" / "example-plugin"
MODULE = EXAMPLE / "normalize_checklist" / "__init__.py"


def test_the_guide_shows_the_example_module_in_full() -> None:
    shown = GUIDE.split("## The example, in full", 1)[1].split("```python\n", 1)[1]
    assert shown.rsplit("```", 1)[0] == MODULE.read_text()
    entry = '[project.entry-points."normalize.drivers"]\nchecklist = ' \
            '"normalize_checklist:ChecklistDriver"\n'
    assert entry in GUIDE and entry in (EXAMPLE / "pyproject.toml").read_text()


def test_the_guide_names_everything_the_example_imports_and_the_whole_protocol() -> None:
    table = GUIDE.split("## The names", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([A-Za-z_]+)`", table))
    imported = {alias.name for node in ast.walk(ast.parse(MODULE.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == "normalize"
                for alias in node.names}
    assert imported and imported <= listed
    members = {n for n in vars(Driver) if not n.startswith("_")} | {"name"}
    assert members == {"name", "from_config", "decide", "on_result", "snapshot", "restore"}
    protocol = GUIDE.split("## The Protocol", 1)[1].split("\n## ", 1)[0]
    assert all(f"**`{m}(" in protocol for m in members - {"name"})
    first_column = set(re.findall(r"^\| `([A-Za-z_]+)`", table, re.M))
    assert first_column <= set(normalize.__all__)
    for name in listed & set(normalize._EXPORTS):
        assert getattr(normalize, name) is not None


def test_the_guides_python_recipe_runs_the_example(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    (tmp_path / "README.txt").write_text("hello\n")
    (tmp_path / "release-check.toml").write_text(
        '[workflow]\nname = "release-check"\ndriver = "checklist"\n[workflow.vars]\n'
        'checklist = ["view README.txt", "note release checked"]\n')
    target = "normalize_checklist:ChecklistDriver"
    with use_entry_points({"normalize.drivers": {"checklist": target}}):
        options = RunOptions(workspace=tmp_path)
        outcome = run_task(start_task(load_spec(str(tmp_path / "release-check.toml"),
                                                tmp_path), "", options), options)
    assert outcome.task.status.value == "done", outcome.task.error
    assert (tmp_path / "CHECKLIST.md").read_text() == (
        "- [x] view README.txt\n- [x] note release checked\n")
