"""A checkpoint log is read from its end: the last whole record, across read blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normalize.store import ckptlog


def records(count: int, gen: int = 7) -> list[bytes]:
    # some longer than a read block, so a record spans blocks
    return [json.dumps({"log_gen": gen, "n": n, "pad": "p" * (ckptlog.BLOCK * 2 if n % 3 == 0
                                                              else n * 1000)}).encode()
            for n in range(count)]


@pytest.mark.parametrize("last", range(1, 9))
def test_the_last_whole_record_of_the_generation_is_found(tmp_path: Path, last: int) -> None:
    log = tmp_path / "t.ckpt"
    log.write_bytes(b"".join(r + b"\n" for r in records(last)))
    found = ckptlog.latest(log, 7)
    assert found is not None and found["n"] == last - 1
    assert ckptlog.latest(log, 8) is None  # another generation's log: the task file holds


@pytest.mark.parametrize("cut", [1, ckptlog.BLOCK - 3, ckptlog.BLOCK + 5, ckptlog.BLOCK * 2])
def test_a_torn_last_record_is_skipped_for_the_one_before(tmp_path: Path, cut: int) -> None:
    log = tmp_path / "t.ckpt"
    whole = records(7)
    log.write_bytes(b"".join(r + b"\n" for r in whole[:6]) + whole[6][:cut])
    warned: list[str] = []
    found = ckptlog.latest(log, 7, warned.append)
    assert found is not None and found["n"] == 5
    assert len(warned) == 1 and "torn" in warned[0]


def test_a_log_of_one_torn_record_or_none_gives_nothing(tmp_path: Path) -> None:
    log = tmp_path / "t.ckpt"
    assert ckptlog.latest(log, 7) is None  # no log
    log.write_bytes(b"")
    assert ckptlog.latest(log, 7) is None
    log.write_bytes(records(1)[0][:100])
    assert ckptlog.latest(log, 7) is None
