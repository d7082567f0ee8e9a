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
