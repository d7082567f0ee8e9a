"""Leases: a task whose holder stopped renewing its lease is taken over, and the old holder is
fenced before its next side effect (a stopped or cut-off process: a zombie)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from batch_support import cli, ended, gated, in_step, needs_sandbox, start, wait_for

pytestmark = needs_sandbox

LEASE = "1"  # seconds a lease lasts without a heartbeat, in these runs


def test_a_zombie_with_a_stale_lease_is_fenced_before_its_next_side_effect(
        tmp_path: Path) -> None:
    person, gate, ws = gated(tmp_path)
    home = tmp_path / "home"
    zombie = start("run", "wf.toml", "--json", cwd=ws, home=home, HOME=str(person),
                   NORMALIZE_LEASE_SECONDS=LEASE)
    try:
        assert zombie.stdout is not None
        task = json.loads(zombie.stdout.readline())["task_id"]
        wait_for(lambda: in_step(home, task, "1.0"), 120, "the task waiting for its gate")
        first = json.loads((home / "tasks" / f"{task}.owner").read_text())["epoch"]
        lease = home / "tasks" / f"{task}.lease.{first}"
        assert lease.exists()
        os.kill(zombie.pid, signal.SIGSTOP)  # alive, holding its flock, renewing nothing
        gate.write_text("go")
        wait_for(lambda: time.time() - lease.stat().st_mtime > 2 * float(LEASE), 30,
                 "the lease expired")
        taker = cli("resume", task, cwd=ws, home=home, HOME=str(person),
                    NORMALIZE_LEASE_SECONDS=LEASE)
        assert taker.returncode == 0, taker.stdout + taker.stderr
        assert (ws / "effects.log").read_text() == "edit\nmark\n"
        owner = json.loads((home / "tasks" / f"{task}.owner").read_text())
        assert owner["epoch"] == first + 1 and owner["pid"] != zombie.pid
    finally:
        gate.write_text("go")
        os.kill(zombie.pid, signal.SIGCONT)
    code, said = ended(zombie)
    assert code != 0, said
    assert "was taken over by process" in said
    assert (ws / "effects.log").read_text() == "edit\nmark\n"  # its `mark` never ran
    state = json.loads((home / "tasks" / f"{task}.json").read_text())
    assert state["status"] == "done" and state["epoch"] == first + 1


def test_a_live_lease_is_not_taken_over(tmp_path: Path) -> None:
    person, gate, ws = gated(tmp_path, repository=False)
    home = tmp_path / "home"
    holder = start("run", "wf.toml", "--json", cwd=ws, home=home, HOME=str(person),
                   NORMALIZE_LEASE_SECONDS=LEASE)
    try:
        assert holder.stdout is not None
        task = json.loads(holder.stdout.readline())["task_id"]
        wait_for(lambda: in_step(home, task, "1.0"), 120, "the task waiting for its gate")
        time.sleep(3 * float(LEASE))  # longer than a lease: only its heartbeat keeps it
        other = cli("resume", task, cwd=ws, home=home, HOME=str(person),
                    NORMALIZE_LEASE_SECONDS=LEASE)
        assert other.returncode != 0 and "is running in process" in other.stderr
    finally:
        gate.write_text("go")
        out, err = holder.communicate(timeout=120)
    assert holder.returncode == 0, out + err
    assert (ws / "effects.log").read_text() == "edit\nmark\n"


def test_a_run_step_gets_its_idempotency_key_in_its_environment(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.toml").write_text(
        '[workflow]\nname = "key"\n[workflow.permissions]\nmode = "yes"\n'
        '[workflow.retry]\nstrategy = "fixed"\nmax_attempts = 2\nbase_delay = 0\n'
        '[[workflow.steps]]\nname = "a"\naction = "run sh -c \'echo $NORMALIZE_IDEMPOTENCY_KEY'
        ' >> keys.txt\'"\n[[workflow.steps]]\nname = "b"\naction = "run sh -c \'echo '
        '$NORMALIZE_IDEMPOTENCY_KEY >> keys.txt; test -e tried || { touch tried; exit 1; }\'"\n')
    done = cli("run", "wf.toml", "--json", cwd=ws, home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    task = json.loads(done.stdout.splitlines()[0])["task_id"]
    # step b failed once and was retried (another action): the retry sent the same key
    assert (ws / "keys.txt").read_text().splitlines() == [f"{task}:0.0", f"{task}:1.0",
                                                          f"{task}:1.0"]


def test_a_state_run_again_after_a_kill_sends_the_same_idempotency_key(
        tmp_path: Path) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    ws = tmp_path / "ws"
    ws.mkdir()
    wait = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    (ws / "sm.toml").write_text(f'''[workflow]
name = "sm"
[workflow.permissions]
mode = "yes"
[[states]]
name = "waiting"
on_interrupt = "rerun"
action = "run sh -c 'echo $NORMALIZE_IDEMPOTENCY_KEY >> keys.txt; {wait}'"
  [[states.transitions]]
  next = "end"
[[states]]
name = "end"
terminal = true
''')
    home = tmp_path / "home"
    first = start("run", "sm.toml", "--json", cwd=ws, home=home, HOME=str(person))
    try:
        assert first.stdout is not None
        task = json.loads(first.stdout.readline())["task_id"]
        wait_for(lambda: (ws / "keys.txt").exists(), 120, "the state's action running")
        first.kill()
    finally:
        first.communicate(timeout=120)
    gate.write_text("go")
    again = cli("resume", task, cwd=ws, home=home, HOME=str(person))
    assert again.returncode == 0, again.stdout + again.stderr
    path = home / "tasks" / f"{task}.jsonl"
    started = [e for e in map(json.loads, path.read_text().splitlines())
               if e.get("type") == "action_started"]
    assert len(started) == 2 and started[0]["key"] != started[1]["key"]
    # the rerun (another action) sent the key of the run the kill cut short (whose line
    # is there too, unless its checkpoint took it back)
    sent = (ws / "keys.txt").read_text().split()
    assert sent and set(sent) == {f"{task}:{started[0]['key']}"}
