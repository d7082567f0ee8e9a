"""Under `umask 000` everything normalize makes in its data home is the owner's alone.

A scripted agent runs a program (journal, task file, result cache, shadow
store, the repo map in `cache/`), then `tasks`, `diff` and `report` run, each
process under umask 000; every directory below the data home must be 0700 and
every file 0600 or tighter, and so must the report; the person's own files
keep the umask's mode.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from secret_shapes import PYTHON, cli

AGENT = """
[workflow]
name = "umask"
[workflow.llm]
provider = "scripted"
model = "script.json"
[workflow.context]
repo_map = 500
[workflow.permissions]
mode = "yes"
"""


def _loose(root: Path) -> list[str]:
    """Paths below `root` (and `root`) that group or others may read, write or enter."""
    loose = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not stat.S_ISLNK(path.lstat().st_mode) and mode & 0o077:
            loose.append(f"{path.relative_to(root.parent)} {mode:04o}")
    return loose


def test_everything_normalize_creates_is_owner_only_under_umask_000(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "data" / "normalize"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "loud.py").write_text("for i in range(400):\n    print('line', i)\n")
    (root / "script.json").write_text(json.dumps([
        f"Looking.\nrun {PYTHON} loud.py\nwrite out.txt <<EOF\nhi\nEOF",
        "done looked"]))
    (root / "agent.toml").write_text(AGENT)
    ran = cli("run", "agent.toml", "--goal", "look", "--json", cwd=root, home=home, umask=0)
    assert ran.returncode == 0, ran.stderr
    task_id, = [p.name[:-5] for p in (home / "tasks").glob("*.json")]
    for args in (["tasks"], ["diff", task_id, "--stat"], ["report", task_id, "-o", "r.html"],
                 ["tasks", "show", task_id, "--full"]):
        done = cli(*args, cwd=root, home=home, umask=0)
        assert done.returncode == 0, done.stderr
    assert (home / "cache").is_dir()  # the repo map's cache, shared by the store's tasks
    assert (home / "tasks" / task_id / "cache").is_dir()
    assert _loose(home.parent) == []
    assert stat.S_IMODE(os.stat(root / "out.txt").st_mode) == 0o666  # the person's file: umask's


def test_the_report_is_owner_only_under_umask_000(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "script.json").write_text(json.dumps(["done nothing to do"]))
    (root / "agent.toml").write_text(AGENT)
    assert cli("run", "agent.toml", "--goal", "g", "--json", cwd=root, home=home).returncode == 0
    done = cli("report", "last", "-o", "r.html", cwd=root, home=home, umask=0)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(root / "r.html").st_mode) & 0o077 == 0


def test_undo_names_files_inert_and_redacted(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    key = "sk-ant-api03-" + "Ab1_" * 10
    odd = "t\x1b]0;pwned\x07.txt"
    make = (f"import pathlib; pathlib.Path({odd!r}).write_text('x'); "
            f"pathlib.Path({key!r}).write_text('y')")
    (root / "script.json").write_text(json.dumps([
        f"Making files.\nrun {PYTHON} -c \"{make}\"", "done made them"]))
    (root / "agent.toml").write_text(AGENT)
    assert cli("run", "agent.toml", "--goal", "g", cwd=root, home=home).returncode == 0
    assert (root / odd).exists()
    done = cli("undo", "last", cwd=root, home=home)
    assert done.returncode == 0, done.stderr
    assert not (root / odd).exists() and not (root / key).exists()
    assert "\x1b" not in done.stdout and key not in done.stdout
    assert "removed t␛]0;pwned␇.txt" in done.stdout  # the task had made it
