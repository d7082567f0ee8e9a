"""With tracing on, programs still get their sandbox: the span processor's at-fork handler
would start a thread in each forked child, and a child with two threads gets no namespace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_traced_run_starts_its_programs_in_their_sandbox(tmp_path: Path) -> None:
    (tmp_path / "wf.toml").write_text(
        '[workflow]\nname = "w"\n[[workflow.steps]]\n'
        "action = \"run python3 -c 'print(6 * 7)'\"\ncapture = \"answer\"\n")
    done = subprocess.run(
        [sys.executable, "-m", "normalize.cli.app", "run", "wf.toml", "--otel", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "CI": "true", "NORMALIZE_HOME": str(tmp_path / "home"),
             "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})  # nothing listens there
    assert done.returncode == 0, done.stdout + done.stderr
    finished = [line for line in done.stdout.splitlines() if '"action_finished"' in line]
    assert len(finished) == 1 and '"status":"success"' in finished[0] and \
        '"preview":"42\\n"' in finished[0], done.stdout


# Tracing started as a run starts it, then many forks: each child counts its threads where a
# sandbox is set up (in `preexec_fn`, after the at-fork handlers ran).
COUNT_THREADS = """
import os, subprocess, sys
from normalize.telemetry import start_tracing
tracing = start_tracing({**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
read, write = os.pipe()
def count():
    os.write(write, b"%d " % len(os.listdir("/proc/self/task")))
for _ in range(int(sys.argv[1])):
    subprocess.run(["/bin/true"], preexec_fn=count, close_fds=False, check=True)
os.close(write)
print(os.read(read, 1 << 16).decode())
"""


def test_no_forked_child_of_a_traced_process_has_a_second_thread() -> None:
    """The provider's at-fork handler re-detected the resource on a thread pool in each child
    (a thread for a moment: about one child in four had two); the processor's started its
    export thread there (every child). Either refuses the child its user namespace."""
    done = subprocess.run([sys.executable, "-c", COUNT_THREADS, "120"], capture_output=True,
                          text=True, timeout=120, check=True)
    counts = done.stdout.split()
    assert len(counts) == 120 and set(counts) == {"1"}, done.stdout
