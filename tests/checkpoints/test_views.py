"""The `+/-` lines per file in the live view's summary and in `tasks show`."""

from __future__ import annotations

import io
from pathlib import Path

from checkpoint_helpers import cli, edit, program, run_scripted
from rich.console import Console

from normalize.cli.render import LiveRenderer


def test_tasks_show_and_the_live_summary_count_lines_per_file(tmp_path: Path,
                                                              normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("a = 1\nb = 2\n")
    (ws / "old.txt").write_text("one\ntwo\n")
    done = run_scripted(ws, normalize_home, edit("calc.py", "a = 1", "a = 10\nc = 3"),
                        program("import os; os.remove('old.txt')"), "done")
    shown = cli("tasks", "show", done.task_id, cwd=ws, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    tail = shown.stdout.splitlines()[-3:]
    assert tail == ["files changed:", "  +2 -1  calc.py", "  +0 -2  old.txt"]

    console = Console(file=io.StringIO(), width=100, height=40, force_terminal=False,
                      color_system=None, _environ={})
    view = LiveRenderer(console, auto_refresh=False)
    for event in done.events:
        view(event)
    view.close()
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "+2 -1  calc.py" in out and "+0 -2  old.txt" in out
    assert out.index("files changed:") > out.index("done")
