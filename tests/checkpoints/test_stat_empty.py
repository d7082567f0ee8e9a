"""`diff --stat` says what changed for a file with no lines added or removed."""

from __future__ import annotations

from pathlib import Path

from checkpoint_helpers import cli

FLOW = """[workflow]
name = "empties"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "swap"
action = "run sh -c 'rm gone.txt; touch new.txt; echo more >> kept.txt'"
"""


def test_a_deleted_empty_file_reads_deleted_not_plus_0_minus_0(tmp_path: Path,
                                                                normalize_home: Path) -> None:
    (tmp_path / "gone.txt").write_text("")
    (tmp_path / "kept.txt").write_text("one\n")
    (tmp_path / "empties.toml").write_text(FLOW)
    ran = cli("run", "empties.toml", "-q", cwd=tmp_path, home=normalize_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    stat = cli("diff", "last", "--stat", cwd=tmp_path, home=normalize_home)
    assert stat.returncode == 0, stat.stderr
    assert sorted(stat.stdout.splitlines()) == sorted([
        " gone.txt  deleted, was empty", " kept.txt  +1 -0", " new.txt  added, empty",
        " 3 files changed, +1 -0"])
