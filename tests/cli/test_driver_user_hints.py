"""Without a model key, the hints around `--driver user` lead somewhere: each one followed works."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cli_helpers import NORMALIZE, cli_env

MODEL_STEP = ('[workflow]\nname = "m"\n[[workflow.steps]]\nname = "look"\n'
              'action = "llm-decide look"\n')


def cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return subprocess.run([*NORMALIZE, *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def test_agent_without_a_key_points_at_a_way_that_needs_no_task_yet(tmp_path: Path) -> None:
    refused = cli(tmp_path, "agent", "look around")
    assert refused.returncode == 2
    assert "resume ID" not in refused.stderr  # no task exists: there is no ID to resume
    assert 'driver = "user"' in refused.stderr and "normalize run FILE --goal TEXT" in \
        refused.stderr
    (tmp_path / "me.toml").write_text('[workflow]\nname = "me"\ndriver = "user"\n')
    mine = cli(tmp_path, "run", "me.toml", "--goal", "look around", stdin="done looked\n")
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "looked" in mine.stdout


def test_a_task_stopped_for_the_key_names_its_own_id_with_driver_user(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(MODEL_STEP)
    failed = cli(tmp_path, "run", "m.toml")
    assert failed.returncode == 1
    found = re.search(r"resume with: normalize resume ([0-9a-f]{8}) once the key is set, or "
                      r"take it over: normalize resume \1 --driver user", failed.stderr)
    assert found, failed.stderr
    taken = cli(tmp_path, "resume", found.group(1), "--driver", "user", stdin="done by hand\n")
    assert taken.returncode == 0, taken.stdout + taken.stderr
