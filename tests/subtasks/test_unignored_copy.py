"""`spawn --isolated` (here through `--attempts`) in a workspace that ignores neither
`node_modules` nor `.venv`: the checkpoints hold them, and the copy links them all the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from subtasks_support import cli, git, journal, needs_sandbox, script, task_state, tasks

PACKAGE = "module.exports = (s, n) => s.padStart(n);\n"


@needs_sandbox
def test_attempts_work_where_node_modules_and_the_venv_are_not_ignored(
        tmp_path: Path, normalize_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the project lies under HOME, as people's do: /tmp, where pytest's directories are, is
    # empty in a program's view, and the copy's links lead to the project's own directories
    monkeypatch.setenv("HOME", str(tmp_path / "person"))
    ws = tmp_path / "person" / "ws"
    (ws / "node_modules" / "left-pad").mkdir(parents=True)
    (ws / "node_modules" / "left-pad" / "index.js").write_text(PACKAGE)
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "bin" / "tool").write_text("#!/bin/sh\necho venv tool\n")
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(ws, "init", "-q")
    git(ws, "add", "calc.py")
    git(ws, "commit", "-qm", "start")  # node_modules and .venv: neither ignored nor committed
    models = [script(tmp_path / f"try{n}.json", [
        "run cat node_modules/left-pad/index.js .venv/bin/tool",
        f"write calc.py <<EOF\ndef add(a, b):\n    return a + b  # attempt {n}\nEOF",
        f"done attempt {n}"]) for n in (1, 2)]
    ran = cli("agent", "--attempts", "2", "--pick", "true", "--model", ",".join(models),
              "--approve", "yes", "-w", str(ws), "fix add", cwd=ws, home=normalize_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "File exists" not in ran.stdout + ran.stderr
    assert (ws / "calc.py").read_text().startswith("def add(a, b):\n    return a + b")
    parent = next(t for t in tasks(normalize_home) if not t.get("parent"))
    kids = [task_state(normalize_home, k) for k in parent["children"]]
    assert [k["status"] for k in kids] == ["done", "done"]
    for kid in kids:
        copy = Path(kid["workspace"])
        assert (copy / "node_modules").is_symlink() and (copy / ".venv").is_symlink()
        read = next(e for e in journal(normalize_home, kid["id"])
                    if e["type"] == "action_finished")
        assert read["status"] == "success" and PACKAGE in read["preview"], (read["error"],
                                                                           read["preview"])
        assert "venv tool" in read["preview"]
    shown = cli("tasks", "show", parent["id"], cwd=ws, home=normalize_home).stdout
    rows = [line for line in shown.splitlines() if line.startswith(tuple(
        f"  {k['id']}  done " for k in kids))]
    assert len(rows) == 2 and all("1 file changed" in row for row in rows), shown  # the links
    # and the stored node_modules never reach the diff: calc.py only
    assert (ws / "node_modules" / "left-pad" / "index.js").read_text() == PACKAGE
    assert not (ws / "node_modules").is_symlink()
