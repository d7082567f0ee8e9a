"""Must-show 2: two holder processes of one task's record in S3 (moto on loopback). One is
stopped (SIGSTOP) past its lease, the other takes the task over; continued, the stale one's next
journal write is refused by the store's own condition, and the journal in the store has no
record of the stale epoch after the take-over. Against a store that drops the condition (the
forgetful proxy), the same stale write lands: the condition is what refuses it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_support import BUCKET, forgetful_proxy, moto_s3, s3_env

from normalize.store.fenced import lease_of, read_record
from normalize.store.objects import S3Objects

pytest.importorskip("moto.server", reason="moto is not installed (.ci/run installs it)")

HOLDER = Path(__file__).with_name("holder.py")
LEASE = "1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_s3() as url:
        yield url


def _holder(url: str, task: str, endpoint: str) -> subprocess.Popen[str]:
    env = {**os.environ, **s3_env(endpoint), "NORMALIZE_LEASE_SECONDS": LEASE}
    return subprocess.Popen([sys.executable, str(HOLDER), url, task], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _say(holder: subprocess.Popen[str], line: str) -> str:
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write(line + "\n")
    holder.stdin.flush()
    return holder.stdout.readline().strip()


def _first(holder: subprocess.Popen[str]) -> str:
    assert holder.stdout is not None
    return holder.stdout.readline().strip()


def _objects(endpoint: str, url: str, monkeypatch: pytest.MonkeyPatch) -> S3Objects:
    for key, value in s3_env(endpoint).items():
        monkeypatch.setenv(key, value)
    return S3Objects(url)


def _stale_holder_writes_after_a_take_over(url: str, endpoint: str, objects: S3Objects
                                           ) -> tuple[str, int | None, list[Any]]:
    """A takes the task, appends, is stopped past its lease; B takes it over and appends; A is
    continued and appends once more. A's answer to that last append, A's exit status, and the
    journal in the store just after it."""
    stale = _holder(url, "t1", endpoint)
    taker: subprocess.Popen[str] | None = None
    try:
        assert _first(stale) == "epoch 1"
        assert _say(stale, "append a1") == "ok"
        os.kill(stale.pid, signal.SIGSTOP)  # alive, holding nothing it can renew
        deadline = time.monotonic() + 30
        while not (lease_of(objects, "t1") or pytest.fail("no lease")).lapsed:
            assert time.monotonic() < deadline, "the lease never lapsed"
            time.sleep(0.1)
        taker = _holder(url, "t1", endpoint)
        assert _first(taker) == "epoch 2", taker.stderr.read() if taker.stderr else ""
        assert _say(taker, "append b1") == "ok"
        os.kill(stale.pid, signal.SIGCONT)
        answer = _say(stale, "append a2")
        _, after = read_record(objects, "t1")
        assert _say(taker, "append b2") == "ok"
        assert _say(taker, "release") == ""
        if answer == "ok":
            _say(stale, "release")  # (a refused one ends by itself)
        return answer, stale.wait(30), after
    finally:
        if stale.poll() is None:
            os.kill(stale.pid, signal.SIGCONT)
        for proc in (stale, taker):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate(timeout=30)  # (and its pipes closed)


def test_a_stale_holders_next_journal_write_is_refused_by_the_stores_condition(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"s3://{BUCKET}/fenced"
    objects = _objects(endpoint, url, monkeypatch)
    answer, status, after = _stale_holder_writes_after_a_take_over(url, endpoint, objects)
    assert answer.startswith("refused: task t1: the store refused this holder's journal "
                             "append (epoch 1)"), answer
    assert status == 3
    assert after == [[1, {"text": "a1"}], [2, {"text": "b1"}]]
    head, entries = read_record(objects, "t1")
    assert head is not None and head.epoch == 2
    assert entries == [[1, {"text": "a1"}], [2, {"text": "b1"}], [2, {"text": "b2"}]]
    took_over = next(n for n, (epoch, _) in enumerate(entries) if epoch == 2)
    assert all(epoch == 2 for epoch, _ in entries[took_over:])  # nothing stale after it


def test_without_the_condition_the_stale_write_lands(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same two holders through a store that drops If-Match/If-None-Match (never allowed
    in a run: `probe` refuses it): the stale holder's write is accepted, over the taker's."""
    url = f"s3://{BUCKET}/unfenced"
    with forgetful_proxy(endpoint) as old:
        objects = _objects(old, url, monkeypatch)
        answer, status, after = _stale_holder_writes_after_a_take_over(url, old, objects)
    assert answer == "ok" and status == 0
    assert after == [[1, {"text": "a1"}], [1, {"text": "a2"}]]  # the taker's b1 clobbered


def test_a_batch_on_a_store_without_conditional_writes_is_refused_at_start(
        endpoint: str, tmp_path: Path) -> None:
    """Must-show 3, end to end: `normalize batch … --store s3://…` through the forgetful proxy
    ends at once with one line naming the URL and the missing condition, exit 2, no batch."""
    (tmp_path / "items.jsonl").write_text('{"n": 1}\n')
    (tmp_path / "wf.toml").write_text('[workflow]\nname = "w"\n[[workflow.steps]]\n'
                                      'name = "s"\naction = "run true"\n')
    home = tmp_path / "home"
    with forgetful_proxy(endpoint) as old:
        env = {**os.environ, **s3_env(old), "NORMALIZE_HOME": str(home)}
        done = subprocess.run(
            [sys.executable, "-m", "normalize.cli.app", "batch", "wf.toml", "--items",
             "items.jsonl", "--store", f"s3://{BUCKET}/old"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"--store s3://{BUCKET}/old: the store does not honour conditional writes: " \
           "If-None-Match: *" in done.stderr
    assert not (home / "batches").exists()
