"""A result recovered on resume is the whole result, not the journal's redacted preview.

The journal shows an `action_finished` result cut to a preview and redacted; a
driver that keeps a result (a workflow's `capture`) keeps executed state, which
resume must hand it whole (house rule 11).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from durability_support import PYTHON, cli, journal, only_task, steps_workflow

KILLED = -signal.SIGKILL
TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"  # a shape the journal redacts
LONG = "a" * 9000 + " END"  # more than a preview holds


def capture_flow(tmp_path: Path, text: str) -> Path:
    """Print `text` and capture it, then write the capture to `cap.txt` (as an argument)."""
    printer = f"import sys; sys.stdout.write({text!r})"
    writer = "import sys; open('cap.txt', 'w').write(sys.argv[1])"
    return steps_workflow(tmp_path / "flow.toml", [
        ("make", f'run {PYTHON} -c "{printer}"'),
        ("keep", f'run {PYTHON} -c "{writer}" {{big}}'),
    ], step_extra={"make": 'capture = "big"\n'})


@pytest.mark.parametrize("text", [LONG, f"token {TOKEN} here"], ids=["long", "secret"])
@pytest.mark.parametrize("point", ["action_finished@1", "checkpoint_append@2"])
def test_a_result_finished_before_a_crash_is_captured_whole_on_resume(
        tmp_path: Path, normalize_home: Path, text: str, point: str) -> None:
    flow = capture_flow(tmp_path, text)
    crashed = cli("run", str(flow), "--quiet", cwd=tmp_path, home=normalize_home, crash=point)
    assert crashed.returncode == KILLED, crashed.stderr
    task_id = only_task(normalize_home)
    finished = [e for e in journal(normalize_home, task_id) if e["type"] == "action_finished"]
    assert [e["key"] for e in finished] == ["0.0"]  # `make` finished, then the kill
    assert finished[0]["preview"] != text  # the journal holds less than the result
    resumed = cli("resume", task_id, "--quiet", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "cap.txt").read_text() == text
    assert not (normalize_home / "tasks" / f"{task_id}.results").exists()  # cleared when saved
    assert TOKEN not in (normalize_home / "tasks" / f"{task_id}.jsonl").read_text()


def test_a_kept_result_is_owner_only_and_only_written_when_the_preview_is_not_whole(
        tmp_path: Path, normalize_home: Path) -> None:
    kept = normalize_home / "tasks"
    flow = capture_flow(tmp_path, LONG)
    crashed = cli("run", str(flow), "--quiet", cwd=tmp_path, home=normalize_home,
                  crash="action_finished@1")
    assert crashed.returncode == KILLED, crashed.stderr
    task_id = only_task(normalize_home)
    assert (kept / f"{task_id}.results").stat().st_mode & 0o777 == 0o600
    (tmp_path / "short").mkdir()
    short = capture_flow(tmp_path / "short", "short")  # its preview is the whole result
    crashed = cli("run", str(short), "--quiet", cwd=tmp_path / "short", home=normalize_home,
                  crash="action_finished@1")
    assert crashed.returncode == KILLED, crashed.stderr
    assert sorted(p.name for p in kept.glob("*.results")) == [f"{task_id}.results"]
