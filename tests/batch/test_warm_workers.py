"""Warm workers: each item is a fork of a worker that stays up, with a fresh process's isolation;
a worker killed mid-item takes its item along, and the item is retried once, its finished side
effects not repeated."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from batch_support import (
    cli,
    edit_items,
    effects,
    in_step,
    needs_sandbox,
    progress,
    runs_of,
    start,
    state,
    wait_for,
)

from normalize.store.ownership import pid_alive

pytestmark = needs_sandbox


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_items_run_as_forks_of_workers_that_stay_up(tmp_path: Path) -> None:
    items = edit_items(tmp_path, 4)
    home = tmp_path / "home"
    done = cli("batch", "wf.toml", "--items", str(items), "--concurrency", "1",
               "--json", cwd=tmp_path, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = batch_id_of(done.stdout)
    tasks = [row["task_id"] for row in progress(home, batch)]
    runs = [next(json.loads(line) for line in (home / "tasks" / f"{t}.jsonl").read_text()
                 .splitlines() if json.loads(line).get("type") == "run_started")
            for t in tasks]
    pids = [run["pid"] for run in runs]
    assert len(set(pids)) == 4  # each item its own process (a fork), as a fresh one was
    assert effects(tmp_path) == {f"r{n:02d}": 1 for n in range(4)}
    assert all(state(home, t)["status"] == "done" for t in tasks)


def batch_id_of(json_stdout: str) -> str:
    return str(json.loads(json_stdout.splitlines()[0])["batch"])


def test_a_worker_killed_mid_item_takes_its_item_along_and_the_item_is_retried_once(
        tmp_path: Path) -> None:
    home_dir = tmp_path / "person"
    home_dir.mkdir()
    gate = home_dir / "gate"
    items = edit_items(tmp_path, 2, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--json", cwd=tmp_path,
                   home=home, HOME=str(home_dir))
    try:
        assert parent.stdout is not None
        batch = json.loads(parent.stdout.readline())["batch"]
        wait_for(lambda: progress(home, batch)[0]["stage"] == "submitted", 60, "item 0")
        item = progress(home, batch)[0]["task_id"]
        wait_for(lambda: in_step(home, item, "1.0"), 120,
                 "item 0's effect done, its process waiting for its gate")
        child = json.loads((home / "tasks" / f"{item}.owner").read_text())["pid"]
        worker = _ppid(child)
        assert "normalize.cli.worker" in _cmdline(worker)  # the item is the worker's fork
        assert _ppid(worker) == parent.pid
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: not pid_alive(child) or _zombie(child), 30,
                 "the item's process gone with its worker")
        wait_for(lambda: progress(home, batch)[0]["attempts"] == 2, 120, "a second attempt")
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    assert effects(tmp_path) == {"r00": 1, "r01": 1}  # the edit, done before, not repeated
    assert state(home, item)["status"] == "done"
    assert runs_of(home, item) == 2
    assert progress(home, batch)[0]["attempts"] == 2
    ended = json.loads(out.splitlines()[-1])
    assert ended["type"] == "batch_ended" and ended["counts"] == {"done": 2}


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
