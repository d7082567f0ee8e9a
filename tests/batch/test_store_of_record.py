"""A batch whose `--store` is S3 (moto on loopback) keeps each item's record there: its lease,
its journal made durable in the store before the effect it guards, its checkpoints. A zombie on
another data home (nothing shared but the store) is fenced by the store's condition alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_support import (
    cli,
    edit_items,
    ended,
    gated,
    in_step,
    needs_sandbox,
    progress,
    start,
    wait_for,
)
from support import alive_with

from normalize.store import TaskStore
from normalize.store.fenced import lease_of, read_checkpoint, read_record
from normalize.store.objects import S3Objects
from normalize.store.record import rebuild

pytest.importorskip("moto.server", reason="moto is not installed (.ci/run installs it)")

pytestmark = needs_sandbox
BUCKET = "records"
SECRET_KEY = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzEXAMPLEKEY9"


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=url, aws_access_key_id="testing",
                     aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": url,
               "FSSPEC_S3_ENDPOINT_URL": url}
    finally:
        server.stop()


def _objects(s3: dict[str, str], url: str, monkeypatch: pytest.MonkeyPatch) -> S3Objects:
    for key, value in s3.items():
        monkeypatch.setenv(key, value)
    return S3Objects(url)


def test_an_items_journal_is_in_the_store_before_the_effect_it_guards(
        tmp_path: Path, s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 2, gates={0: gate})
    url = f"s3://{BUCKET}/record"
    objects = _objects(s3, url, monkeypatch)
    home = tmp_path / "runner"
    secret = {**s3, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}  # (moto takes any)
    parent = start("batch", "wf.toml", "--items", str(items), "--json", "--store", url,
                   "--item-workspace", f"clone:{tmp_path}/{{item.path}}", cwd=tmp_path,
                   home=home, HOME=str(person), **secret)
    try:
        assert parent.stdout is not None
        batch = json.loads(parent.stdout.readline())["batch"]
        wait_for(lambda: progress(home, batch)[0]["stage"] == "submitted", 120, "item 0")
        item = progress(home, batch)[0]["task_id"]
        wait_for(lambda: in_step(home, item, "1.0"), 120, "item 0 in its wait step")
        # its program runs (the effect under way, found by the gate in its command line):
        # the store has the intent already
        wait_for(lambda: bool(alive_with(str(gate))), 120, "item 0's program waiting at its gate")
        head, entries = read_record(objects, item)
        assert head is not None and head.epoch == 1
        kinds = [json.loads(line)["type"] for _, line in entries]
        assert kinds.count("action_started") == 2 and kinds.count("action_finished") == 1
        actions = [kind for kind in kinds if kind.startswith("action_")]
        assert actions[-1] == "action_started"  # the wait step's, its effect under way
        live = lease_of(objects, item)
        assert live is not None and not live.lapsed and live.epoch == 1
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    for position in (0, 1):
        task = progress(home, batch)[position]["task_id"]
        local = (home / "tasks" / f"{task}.jsonl").read_bytes()
        _, entries = read_record(objects, task)
        assert b"".join(line.encode() + b"\n" for _, line in entries) == local
        assert {epoch for epoch, _ in entries} == {1}
        state = read_checkpoint(objects, task)
        assert state is not None and json.loads(state)["status"] == "done"
        config = json.loads(state)["driver_config_file"]
        assert objects.get(f"record/tasks/{task}/files/{config}") is not None
        ended = lease_of(objects, task)
        assert ended is not None and ended.lapsed  # released as the run ended
    for key in objects.list(""):  # the store's credentials are in nothing it holds
        found = objects.get(key)
        assert found is not None and SECRET_KEY.encode() not in found[0], key
    # another data home rebuilds an item from the store alone, exactly as it ran
    task = progress(home, batch)[1]["task_id"]
    other = tmp_path / "other"
    assert rebuild(objects, task, other)
    assert (other / "tasks" / f"{task}.jsonl").read_bytes() == \
        (home / "tasks" / f"{task}.jsonl").read_bytes()
    assert TaskStore(other).load(task).to_dict() == TaskStore(home).load(task).to_dict()
    assert (other / "tasks").stat().st_mode & 0o077 == 0
    shown = cli("tasks", "show", task, cwd=tmp_path, home=other)
    assert shown.returncode == 0 and " done" in shown.stdout.splitlines()[0], shown.stderr
    assert not rebuild(objects, "nosuchtask", other)
    local = (home / "tasks" / f"{batch}.jsonl").read_bytes()  # the parent's record too
    _, entries = read_record(objects, batch)
    assert b"".join(line.encode() + b"\n" for _, line in entries) == local
    state = read_checkpoint(objects, batch)
    assert state is not None and json.loads(state)["status"] == "done"
    status = cli("batch", "status", batch, cwd=tmp_path, home=home, **s3)
    assert "2 items (2 done)" in status.stdout, status.stdout + status.stderr


def test_a_zombie_on_another_data_home_is_fenced_by_the_store_alone(
        tmp_path: Path, s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Must-show 2 with `normalize` itself: the run's first holder is stopped past its lease
    in its own data home; a copy of that home resumes it (nothing shared with the first but the
    store and the workspace); continued, the first holder's next journal write is refused by
    the store (its own data home still says it owns the task) and its `mark` never runs."""
    person, gate, ws = gated(tmp_path)
    url = f"s3://{BUCKET}/zombie"
    objects = _objects(s3, url, monkeypatch)
    first, second = tmp_path / "home1", tmp_path / "home2"
    run = {"HOME": str(person), "NORMALIZE_LEASE_SECONDS": "1", "NORMALIZE_RECORD": url, **s3}
    zombie = start("run", "wf.toml", "--json", cwd=ws, home=first, **run)
    try:
        assert zombie.stdout is not None
        task = json.loads(zombie.stdout.readline())["task_id"]
        wait_for(lambda: in_step(first, task, "1.0"), 120, "the task waiting for its gate")
        os.kill(zombie.pid, signal.SIGSTOP)
        shutil.copytree(first, second, symlinks=True)  # another node's home, as it was
        wait_for(lambda: (lease_of(objects, task) or pytest.fail("no lease")).lapsed, 30,
                 "the lease lapsed")
        gate.write_text("go")
        taker = cli("resume", task, cwd=ws, home=second, **run)
        assert taker.returncode == 0, taker.stdout + taker.stderr
        assert (ws / "effects.log").read_text() == "edit\nmark\n"
    finally:
        gate.write_text("go")
        os.kill(zombie.pid, signal.SIGCONT)
    code, said = ended(zombie)
    assert code != 0, said
    assert "the store refused this holder's journal append (epoch 1)" in said
    time.sleep(0.5)
    assert (ws / "effects.log").read_text() == "edit\nmark\n"  # the zombie's mark never ran
    owner = json.loads((first / "tasks" / f"{task}.owner").read_text())
    assert owner["epoch"] == 1  # its own home never learnt of the take-over: the store fenced it
    head, entries = read_record(objects, task)
    assert head is not None and head.epoch == 2
    took_over = next(n for n, (epoch, _) in enumerate(entries) if epoch == 2)
    assert {epoch for epoch, _ in entries[took_over:]} == {2}
    state = read_checkpoint(objects, task)
    assert state is not None and json.loads(state)["status"] == "done"


def test_a_killed_run_is_resumed_from_the_store_alone_on_a_fresh_data_home(
        tmp_path: Path, s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`resume TASK --store URL` on a data home that has nothing of the task: its state and
    journal come from the store; the finished `edit` is not repeated, the `wait` cut short is
    run again (its on_interrupt), and the run takes the task at the next epoch there."""
    person, gate, ws = gated(tmp_path)
    url = f"s3://{BUCKET}/fresh"
    objects = _objects(s3, url, monkeypatch)
    first, fresh = tmp_path / "home1", tmp_path / "fresh"
    run = {"HOME": str(person), "NORMALIZE_LEASE_SECONDS": "1", **s3}
    killed = start("run", "wf.toml", "--json", cwd=ws, home=first, NORMALIZE_RECORD=url, **run)
    try:
        assert killed.stdout is not None
        task = json.loads(killed.stdout.readline())["task_id"]
        wait_for(lambda: in_step(first, task, "1.0"), 120, "the task waiting for its gate")
    finally:
        killed.kill()  # the node is lost: its data home with it
        killed.communicate(timeout=60)
    shutil.rmtree(first)
    gate.write_text("go")
    wait_for(lambda: (lease_of(objects, task) or pytest.fail("no lease")).lapsed, 30,
             "the lease lapsed")
    resumed = cli("resume", task, "--store", url, cwd=ws, home=fresh, **run)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert in_step(fresh, task, "wait", run=2)  # the wait cut short ran again
    assert (ws / "effects.log").read_text() == "edit\nmark\n"
    head, entries = read_record(objects, task)
    assert head is not None and head.epoch == 2
    assert [json.loads(line)["type"] for _, line in entries].count("run_started") == 2
    state = read_checkpoint(objects, task)
    assert state is not None and json.loads(state)["status"] == "done"
    missing = cli("resume", "feedbeef", "--store", url, cwd=ws, home=fresh, **run)
    assert missing.returncode == 2 and missing.stderr.strip().endswith(
        f"no record of task feedbeef in {url}"), missing.stderr
