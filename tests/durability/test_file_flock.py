"""`FileFlock`: the store's and the checkpoints' lock, across processes and threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from normalize.fsutil import FileFlock, LockTimeout

HOLD = textwrap.dedent("""
    import sys
    from {module} import {name}
    lock = {name}(sys.argv[1])
    lock.acquire()
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
""")


def holder(path: Path, module: str, name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(module=module, name=name),
                             str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize(("module", "name"), [("normalize.fsutil", "FileFlock"),
                                              ("filelock", "FileLock")])
def test_a_lock_held_by_another_process_times_out_and_is_taken_once_it_dies(
        tmp_path: Path, module: str, name: str) -> None:
    path = tmp_path / "x.lock"
    proc = holder(path, module, name)  # filelock: a process of an older normalize, or a test
    try:
        lock = FileFlock(path, timeout=0.2)
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            lock.acquire()
        assert time.monotonic() - started >= 0.2
        assert not lock.is_locked
    finally:
        proc.kill()  # the kernel drops a dead process's flock
        proc.communicate()
    lock.acquire(timeout=30)
    assert lock.is_locked
    lock.release()
    assert not lock.is_locked


def test_threads_of_one_process_take_it_in_turn(tmp_path: Path) -> None:
    lock = FileFlock(tmp_path / "x.lock", timeout=30)
    inside: list[int] = []
    overlaps: list[int] = []

    def work(n: int) -> None:
        for _ in range(20):
            with lock:
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                time.sleep(0.001)
                inside.remove(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not overlaps


def test_the_lock_file_is_owner_only(tmp_path: Path) -> None:
    with FileFlock(tmp_path / "x.lock"):
        pass
    assert (tmp_path / "x.lock").stat().st_mode & 0o777 == 0o600
