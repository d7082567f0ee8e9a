"""The suite's own guards: a test that leaves a process running fails, named, and it is killed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

LEAKY = '''
import subprocess, sys
from pathlib import Path


def test_tidy(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    child.kill()
    child.wait()


def test_leaky():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    Path("leaked.pid").write_text(str(child.pid))
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_leftover_child_fails_its_test_and_is_killed(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leaks.py").write_text(LEAKY)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rA", "test_leaks.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert time.monotonic() - started < 20  # the child was killed, not waited out
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 passed, 1 error" in proc.stdout  # test_leaky ran; its teardown failed
    assert "ERROR at teardown of test_leaky" in proc.stdout
    assert "test_leaks.py::test_leaky left processes running: " in proc.stdout
    assert "-c import time; time.sleep(30))" in proc.stdout
    pid = int((tmp_path / "leaked.pid").read_text())
    try:
        assert not _alive(pid)  # killed by the check, not left to sleep its 30 seconds
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
