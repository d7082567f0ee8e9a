"""A missing or broken harness: one line naming it and what to do, exit 2 before anything ran,
or a failed turn carrying the harness's last output lines.

The broken CLIs are small stand-in programs (a harness that crashes or prints garbage on cue
cannot be had from the real one); the not-logged-in case runs the real Claude Code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness_support import events_of, harness_bin, of_type

INIT = '{"type":"system","subtype":"init","session_id":"s-1","model":"m"}'


def stand_in(tmp_path: Path, body: str) -> str:
    """A `claude` that says version 2.1.0 when asked and otherwise runs `body` (Python)."""
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\nimport sys\n"
                    "if sys.argv[1:] == ['--version']:\n    print('2.1.0 (Claude Code)')\n"
                    f"    sys.exit(0)\n{body}\n")
    path.chmod(0o755)
    return str(path)


def agent(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--harness",
                           "claude", "--json", "fix it"], cwd=ws, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)


def base_env(program: str | None) -> dict[str, str]:
    env = {**os.environ, "CI": "true", "ANTHROPIC_API_KEY": "sk-ant-test-key"}
    env.pop("NORMALIZE_CLAUDE_BIN", None)
    if program is not None:
        env["NORMALIZE_CLAUDE_BIN"] = program
    return env


def no_task_was_made() -> bool:
    tasks = Path(os.environ["NORMALIZE_HOME"]) / "tasks"
    return not tasks.exists() or not any(tasks.iterdir())


def test_a_harness_that_is_not_installed_is_refused_before_a_task(tmp_path: Path) -> None:
    env = base_env(None)
    env["PATH"] = str(tmp_path)  # nothing called claude on it
    env.pop("NORMALIZE_CLAUDE_BIN", None)
    proc = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--harness",
                           "claude", "fix it"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--harness claude: claude is not installed" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert no_task_was_made()


def test_an_unknown_harness_is_refused(tmp_path: Path) -> None:
    other = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "--harness",
                            "gemini", "fix it"], cwd=tmp_path, env=base_env(None),
                           capture_output=True, text=True, timeout=60, check=False)
    assert other.returncode == 2 and "unknown harness 'gemini'" in other.stderr


def test_a_version_too_old_is_refused(tmp_path: Path) -> None:
    program = stand_in(tmp_path, "")
    Path(program).write_text(f"#!{sys.executable}\nprint('1.0.3 (Claude Code)')\n")
    proc = agent(tmp_path, base_env(program))
    assert proc.returncode == 2
    assert "claude 1.0.3 is too old" in proc.stderr and no_task_was_made()


def test_claude_without_a_key_is_not_logged_in(tmp_path: Path) -> None:
    env = base_env(harness_bin("claude"))
    env.pop("ANTHROPIC_API_KEY")
    env.pop("ANTHROPIC_AUTH_TOKEN", None)
    proc = agent(tmp_path, env)
    assert proc.returncode == 2
    assert "claude is not logged in for normalize: set ANTHROPIC_API_KEY" in proc.stderr
    assert no_task_was_made()


def test_a_harness_that_dies_mid_turn_fails_the_turn_with_its_last_lines(
        tmp_path: Path) -> None:
    program = stand_in(tmp_path, f"print({INIT!r}, flush=True)\n"
                                 "print('fatal: the heap is exhausted', file=sys.stderr)\n"
                                 "sys.exit(7)")
    proc = agent(tmp_path, base_env(program))
    assert proc.returncode == 1, proc.stderr
    ended = of_type(events_of(proc.stdout), "run_ended")[-1]
    assert ended["status"] == "failed"
    assert ended["summary"] == ("claude stopped mid-turn (exit status 7); it said: "
                                "fatal: the heap is exhausted")
    assert of_type(events_of(proc.stdout), "harness_session")[0]["session_id"] == "s-1"


def test_output_normalize_cannot_read_fails_the_turn(tmp_path: Path) -> None:
    program = stand_in(tmp_path, "print('<html>502 Bad Gateway</html>')")
    proc = agent(tmp_path, base_env(program))
    assert proc.returncode == 1, proc.stderr
    summary = of_type(events_of(proc.stdout), "run_ended")[-1]["summary"]
    assert summary.startswith("claude printed nothing normalize can read")
    assert summary.endswith("it said: <html>502 Bad Gateway</html>")
