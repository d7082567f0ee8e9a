"""`tasks show ID`: each step with its output (`--full` for whole outputs)."""

from __future__ import annotations

import re
from pathlib import Path

from support.cli import cli

FORTY = "".join(f"row_{n:02d} = {n}\n" for n in range(1, 41))
FLOW = ('[workflow]\nname = "look"\n\n[[workflow.steps]]\nname = "look"\n'
        'action = "view forty.py"\n\n[[workflow.steps]]\nname = "fail"\n'
        'action = "view missing.py"\non_error = "continue"\n')


def test_tasks_show_shows_each_steps_output_and_full_shows_it_whole(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "forty.py").write_text(FORTY)
    (tmp_path / "look.toml").write_text(FLOW)
    assert cli("run", "look.toml", "-q", cwd=tmp_path, home=normalize_home).returncode == 0
    shown = cli("tasks", "show", "last", cwd=tmp_path, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  ✓ view forty.py"))
    assert "row_01 = 1" in lines[at + 1] and "row_07 = 7" in lines[at + 7]
    assert lines[at + 8].strip().startswith("… ")
    assert re.search(r"`normalize tasks show [0-9a-f]{8} --full`$", lines[at + 8])
    assert "fetch" not in shown.stdout  # a command of the model's language, not of the shell
    assert "error: " in shown.stdout and "missing.py" in shown.stdout  # the failure, error-first

    full = cli("tasks", "show", "last", "--full", cwd=tmp_path, home=normalize_home)
    assert all(f"row_{n:02d} = {n}" in full.stdout for n in range(1, 41)), full.stdout
    assert "--full`" not in full.stdout
