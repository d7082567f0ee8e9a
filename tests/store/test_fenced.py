"""A task's record in a `file://` store, in one process: the lease's epochs, the fenced head, the
journal rolled into segments (a stale holder's orphan segment never read), checkpoints."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from normalize.errors import StaleEpochError, TaskLockedError
from normalize.store import fenced
from normalize.store.fenced import FencedJournal, ObjectLease, expire_lease, lease_of, read_record
from normalize.store.objects import FileObjects


@pytest.fixture
def objects(tmp_path: Path) -> FileObjects:
    return FileObjects(tmp_path / "store")


def _take(objects: FileObjects, holder: str) -> tuple[ObjectLease, FencedJournal]:
    lease = ObjectLease(objects, "t", holder)
    journal = FencedJournal(objects, "t", lease.acquire())
    journal.fence()
    return lease, journal


def test_a_live_lease_is_refused_and_a_released_one_taken_at_the_next_epoch(
        objects: FileObjects) -> None:
    first, _ = _take(objects, "one")
    assert first.epoch == 1
    with pytest.raises(TaskLockedError, match="task t is running in one"):
        ObjectLease(objects, "t", "two").acquire()
    first.release()
    second, _ = _take(objects, "two")
    assert second.epoch == 2
    assert not first.renew() and first.lost.is_set()  # its renewal is refused: lost


def test_an_expired_lease_is_taken_and_only_by_one_of_racing_takers(
        objects: FileObjects) -> None:
    _take(objects, "one")  # (its holder goes quiet)
    assert not expire_lease(objects, "t", 7)  # not its epoch: left alone
    assert expire_lease(objects, "t", 1)
    lapsed = lease_of(objects, "t")
    assert lapsed is not None and lapsed.lapsed
    won: list[int] = []
    gate = threading.Barrier(5)

    def take() -> None:
        gate.wait()
        try:
            won.append(ObjectLease(objects, "t").acquire())
        except TaskLockedError:
            pass

    threads = [threading.Thread(target=take) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert won == [2]


def test_a_stale_holder_is_refused_every_kind_of_write(objects: FileObjects) -> None:
    _, stale = _take(objects, "one")
    stale.append([{"n": 1}])
    expire_lease(objects, "t", 1)
    _, taker = _take(objects, "two")
    for write in (lambda: stale.append([{"n": 2}]), lambda: stale.checkpoint(b"{}"),
                  stale.fence):
        with pytest.raises(StaleEpochError, match="another holder took the task over"):
            write()
    taker.append([{"n": 3}])
    assert read_record(objects, "t")[1] == [[1, {"n": 1}], [2, {"n": 3}]]


def test_a_long_journal_rolls_into_segments_and_reads_back_whole(
        objects: FileObjects, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fenced, "ROLL", 4)
    _, journal = _take(objects, "one")
    for n in range(11):
        journal.append([{"n": n}])
    head, entries = read_record(objects, "t")
    assert head is not None and head.first == 8 and len(head.tail) == 3
    assert [r["n"] for _, r in entries] == list(range(11))
    assert len(objects.list("record/tasks/t/journal/")) == 2


def test_a_segment_a_stale_holder_rolled_is_never_read(
        objects: FileObjects, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fenced, "ROLL", 2)
    _, stale = _take(objects, "one")
    stale.append([{"n": 0}])
    stale.append([{"n": 1}])
    expire_lease(objects, "t", 1)
    _, taker = _take(objects, "two")
    with pytest.raises(StaleEpochError):
        stale.append([{"n": "stale"}])  # it rolled its tail into a segment, then was refused
    orphan = "record/tasks/t/journal/000000000000-00000001"
    assert objects.list("record/tasks/t/journal/") == [orphan]
    assert [r["n"] for _, r in read_record(objects, "t")[1]] == [0, 1]
    taker.append([{"n": 2}])  # the taker rolls the same records under its own epoch
    taker.append([{"n": 3}])
    assert [r["n"] for _, r in read_record(objects, "t")[1]] == [0, 1, 2, 3]


def test_the_head_names_the_current_checkpoint(objects: FileObjects) -> None:
    _, journal = _take(objects, "one")
    assert fenced.read_checkpoint(objects, "t") is None
    journal.checkpoint(b'{"turn": 1}')
    key = journal.checkpoint(b'{"turn": 2}')
    assert key == "record/tasks/t/state/00000001-000002.json"
    assert fenced.read_checkpoint(objects, "t") == b'{"turn": 2}'


def test_a_rebuild_takes_only_the_files_a_record_keeps(objects: FileObjects,
                                                        tmp_path: Path) -> None:
    from normalize.errors import StoreError
    from normalize.store.record import rebuild

    _, journal = _take(objects, "one")
    journal.append(['{"type":"notice"}'])
    journal.checkpoint(b'{"id": "t"}')
    home = tmp_path / "home"
    assert rebuild(objects, "t", home)
    assert (home / "tasks" / "t.jsonl").read_bytes() == b'{"type":"notice"}\n'
    objects.put_if_absent("record/tasks/t/files/run.sh", b"planted")
    with pytest.raises(StoreError, match="not a file a task's record keeps"):
        rebuild(objects, "t", home)
    with pytest.raises(StoreError, match="is not an id"):
        rebuild(objects, "../t", home)


def test_a_run_that_lost_the_task_lets_it_go_without_writing_or_raising(
        objects: FileObjects) -> None:
    from normalize.store.record import RunRecord

    stale = RunRecord(objects, "t")
    assert stale.take(1) == 1
    stale.line(b'{"n":1}\n', durable=True)
    stale.line(b'{"n":2}\n', durable=False)  # waits for the next durable one
    expire_lease(objects, "t", 1)
    taker = RunRecord(objects, "t")
    assert taker.take(1) == 2
    stale.release()  # its buffered line is refused by the store: dropped, not raised
    taker.line(b'{"n":3}\n', durable=True)
    taker.release()
    assert read_record(objects, "t")[1] == [[1, '{"n":1}'], [2, '{"n":3}']]
    lease = lease_of(objects, "t")
    assert lease is not None and lease.epoch == 2 and lease.lapsed
