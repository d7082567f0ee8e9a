"""`normalize agent -` and `--task-file`: the task read whole from stdin or a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_helpers import VENV_BIN, cli, json_lines

KEY_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NORMALIZE_MODEL")
LONG = "Look at calc.py and say what mean does.\n" + "Context line that matters.\n" * 200


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": ["view calc.py", "done looked"]}))
    return script


def _goal(home: Path, out: str) -> str:
    task_id = json_lines(out)[0]["task_id"]
    return str(json.loads((home / "tasks" / f"{task_id}.json").read_text())["goal"])


def test_stdin_file_and_argument_run_the_same_task(repo: Path, tmp_path: Path) -> None:
    script, home = _script(tmp_path), tmp_path / "home"
    flags = ("--model", f"scripted:{script}", "--json")
    by_arg = cli("agent", LONG.strip("\n"), *flags, cwd=repo, home=home, drop=KEY_VARS)
    (tmp_path / "task.txt").write_text(LONG)
    by_file = cli("agent", "--task-file", str(tmp_path / "task.txt"), *flags, cwd=repo,
                  home=home, drop=KEY_VARS)
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    env.update(NORMALIZE_HOME=str(home), PATH=VENV_BIN + os.pathsep + env.get("PATH", ""))
    by_stdin = subprocess.run([sys.executable, "-m", "normalize.cli.app", "agent", "-", *flags],
                              cwd=repo, env=env, input=LONG, capture_output=True, text=True,
                              timeout=120)
    for done in (by_arg, by_file, by_stdin):
        assert done.returncode == 0, done.stderr
        assert json_lines(done.stdout)[-1]["summary"] == "looked"
        assert _goal(home, done.stdout) == LONG.strip("\n")  # kept whole
    task_id = json_lines(by_stdin.stdout)[0]["task_id"]
    shown = cli("tasks", "show", task_id, cwd=repo, home=home)
    goal_line = next(line for line in shown.stdout.splitlines() if "goal:" in line)
    assert "Look at calc.py" in goal_line and "201 lines" in goal_line
    assert "Context line" not in shown.stdout  # cut in the view


def test_unreadable_or_empty_task_file_is_one_line(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "empty.txt").write_text("\n  \n")
    for path, expected in ((tmp_path / "missing.txt", "No such file"),
                           (tmp_path / "empty.txt", "empty")):
        done = cli("agent", "--task-file", str(path), cwd=repo, home=home, drop=KEY_VARS)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"normalize: error: --task-file {path}: ")
        assert expected in done.stderr and len(done.stderr.splitlines()) == 1
    both = cli("agent", "x", "--task-file", str(tmp_path / "empty.txt"), cwd=repo, home=home)
    assert both.returncode == 2 and "not both" in both.stderr
