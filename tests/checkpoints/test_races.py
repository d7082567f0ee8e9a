"""Undo and the report never write outside while a directory is swapped for a symlink (issue 23).

A thread exchanges a workspace directory with a symlink to an outside
directory (`renameat2(RENAME_EXCHANGE)`, so the name is always one or the
other) as fast as it can, while 500 restores and 500 reports run in-process
and one of each through the CLI. The outside directory holds files of the
same names: none may change, none may vanish, none may appear; every
refusal names the linked component.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from checkpoint_helpers import Done, cli, program, run_scripted

from normalize.checkpoints.changes import TaskChanges, plan_restore
from normalize.checkpoints.reportfile import save_report
from normalize.checkpoints.restore import apply_restore
from normalize.errors import UsageError

RUNS = 500
AT_FDCWD = -100
RENAME_EXCHANGE = 2
SENTINELS = {"gone.txt": b"outside: must not be unlinked\n",
             "b.txt": b"outside: must not be overwritten\n",
             "report.html": b"outside: not a report\n"}

_libc = ctypes.CDLL(None, use_errno=True)
if not hasattr(_libc, "renameat2"):
    pytest.skip("renameat2 is needed to swap a directory atomically", allow_module_level=True)


def exchange(a: Path, b: Path) -> None:
    if _libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


@contextmanager
def swapping(directory: Path, outside: Path) -> Iterator[list[int]]:
    """Exchange `directory` with a symlink to `outside` in a loop until the block ends."""
    link = directory.with_name(directory.name + "-link")
    os.symlink(outside, link)
    stop = threading.Event()
    swaps = [0]

    def loop() -> None:
        while not stop.is_set():
            exchange(directory, link)
            swaps[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join(10)
        if directory.is_symlink():
            exchange(directory, link)
        link.unlink()


def outside_dir(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, data in SENTINELS.items():
        (outside / name).write_bytes(data)
    return outside


def assert_untouched(outside: Path) -> None:
    assert sorted(os.listdir(outside)) == sorted(SENTINELS)  # nothing made, nothing unlinked
    for name, data in SENTINELS.items():
        assert (outside / name).read_bytes() == data, name


@pytest.fixture
def task(tmp_path: Path, normalize_home: Path) -> tuple[Done, Path]:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "gone.txt").write_text("the task deletes me\n")
    (ws / "sub" / "b.txt").write_text("before\n")
    done = run_scripted(ws, normalize_home, program(
        "import os; os.remove('sub/gone.txt'); open('sub/b.txt', 'w').write('after\\n'); "
        "open('sub/a.txt', 'w').write('made\\n')"), "done")
    assert done.outcome.status.value == "done", done.outcome.error
    return done, ws


def test_500_restores_while_a_directory_is_swapped_write_nothing_outside(
        task: tuple[Done, Path], tmp_path: Path, normalize_home: Path) -> None:
    done, ws = task
    outside = outside_dir(tmp_path)
    changes = TaskChanges.open(done.store, done.store.load(done.task_id))
    back, _, _ = plan_restore(changes, changes.steps[0], force=True)
    forth = changes.repo.entries(changes.steps[-1].tree, list(back))
    assert sorted(back) == ["sub/a.txt", "sub/b.txt", "sub/gone.txt"]
    refusals: list[str] = []
    restored = 0
    with swapping(ws / "sub", outside) as swaps:
        for run in range(RUNS):
            todo = back if run % 2 == 0 else {p: forth.get(p) for p in back}
            done_now, refused = apply_restore(changes.repo, todo)
            restored += len(done_now)
            refusals += [f"{path}: {why}" for path, why in refused.items()]
    assert_untouched(outside)
    assert swaps[0] > RUNS and refusals and restored  # the race was really run, both ways
    for line in refusals:
        assert line.split(": ", 1)[1].startswith("sub is a symlink or no longer a directory")
    with swapping(ws / "sub", outside):
        proc = cli("undo", done.task_id, "--force", cwd=ws, home=normalize_home)
    assert proc.returncode in (0, 1), proc.stderr
    assert all("refused sub/" in line for line in proc.stderr.splitlines()), proc.stderr
    assert_untouched(outside)


def test_500_reports_while_their_directory_is_swapped_write_nothing_outside(
        task: tuple[Done, Path], tmp_path: Path, normalize_home: Path) -> None:
    done, ws = task
    outside = outside_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    refusals: list[str] = []
    with swapping(out, outside) as swaps:
        for _ in range(RUNS):
            try:
                path = save_report("<p>report</p>", done.task_id, normalize_home,
                                   out / "report.html")
            except UsageError as exc:
                refusals.append(str(exc))
            else:
                assert path == out / "report.html"
    assert_untouched(outside)
    assert swaps[0] > RUNS and 0 < len(refusals) < RUNS
    for message in refusals:
        assert f"refusing to write the report through {out} (a symlink" in message
    with swapping(out, outside):
        proc = cli("report", done.task_id, "-o", str(out / "report.html"), cwd=ws,
                   home=normalize_home)
    assert proc.returncode in (0, 2), proc.stderr
    assert proc.returncode == 0 or f"through {out} (a symlink" in proc.stderr
    assert_untouched(outside)


def test_a_report_never_replaces_or_follows_a_planted_symlink(
        task: tuple[Done, Path], tmp_path: Path, normalize_home: Path) -> None:
    done, ws = task
    outside = outside_dir(tmp_path)
    os.symlink(outside / "report.html", ws / "report.html")
    proc = cli("report", done.task_id, "-o", "report.html", cwd=ws, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"normalize: error: report.html: refusing to write the report through "
        f"{ws / 'report.html'} (a symlink, or not a directory)"]
    assert_untouched(outside) and (ws / "report.html").is_symlink()


def test_the_default_report_is_owner_only_under_the_data_home(
        task: tuple[Done, Path], normalize_home: Path) -> None:
    done, ws = task
    before = sorted(os.listdir(ws))
    proc = cli("report", done.task_id, cwd=ws, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    path = normalize_home / "reports" / f"report-{done.task_id}.html"
    assert proc.stdout == f"wrote {path}\n" and path.is_absolute()
    assert "<html" in path.read_text()
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert sorted(os.listdir(ws)) == before  # nothing in the project for `git status` to see
