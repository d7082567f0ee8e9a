"""Must-show 3: kill -9 during a slow MCP call; resume reports the outcome unknown and starts
the server afresh; no server outlives its run (checked by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from mcp_helpers import (
    PY,
    alive,
    cli,
    cli_env,
    fixture_server,
    host_pid,
    json_lines,
    kill,
    wait_gone,
    write_config,
)


def test_kill_9_mid_call_then_resume(tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    marker = root / "slow.pid"  # the server may write only in the workspace (sandbox)
    write_config(normalize_home, fixture_server("fx", timeout=120))
    script = root / "script.json"
    script.write_text(json.dumps([f"A slow call.\nmcp fx slow seconds=120 marker={marker}"]))
    proc = subprocess.Popen([PY, "-m", "normalize.cli.app", "agent", "go", "--approve", "yes",
                             "--model", f"scripted:{script}", "--json"], cwd=root,
                            env=cli_env(normalize_home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    server_pid = 0
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        server_pid = host_pid(marker.read_text())
        assert server_pid and alive(server_pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    try:
        assert wait_gone(server_pid), "the server outlived normalize's kill -9"
    finally:
        kill(server_pid)
    task_id, = [p.name[:-5] for p in (normalize_home / "tasks").glob("*.json")]

    script.write_text(json.dumps(["Is the server back?\nmcp fx pid", "done checked"]))
    resumed = cli("resume", task_id, "--json", cwd=root, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    events = json_lines(resumed.stdout)
    interrupted = [e for e in events if e["type"] == "action_interrupted"]
    assert [(e["tool"], e["rerun"]) for e in interrupted] == [("mcp", False)]
    finished = [e for e in events if e["type"] == "action_finished"]
    assert finished[0]["status"] == "interrupted"
    assert "outcome unknown" in str(finished[0]["error"])
    assert finished[1]["status"] == "success"
    fresh = str(finished[1]["preview"]).strip()
    assert fresh != marker.read_text()  # started afresh
    deadline = time.monotonic() + 5
    while host_pid(fresh) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not host_pid(fresh), "the resumed run left its server running"
