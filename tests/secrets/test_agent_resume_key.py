"""An agent killed in the middle of a decision later writes the real key, not `[REDACTED]`.

The decision (view, then write `key.txt` holding a key) is in the checkpoint
when the process is SIGKILLed before its second action; `resume` runs it from
there. The file gets the key as the model wrote it, while the journal and
`--json` output never show it.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from secret_shapes import KEY, cli

AGENT = """
[workflow]
name = "keywriter"
[workflow.llm]
provider = "scripted"
model = "script.json"
[workflow.permissions]
mode = "yes"
"""


def test_a_killed_agent_resumes_and_writes_the_real_key(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "notes.txt").write_text("the key goes in key.txt\n")
    line = f"ANTHROPIC_API_KEY={KEY}"
    (root / "script.json").write_text(json.dumps([
        f"Writing the key file now.\nview notes.txt\nwrite key.txt <<EOF\n{line}\nEOF",
        "done wrote the key file"]))
    (root / "agent.toml").write_text(AGENT)
    crashed = cli("run", "agent.toml", "--goal", "write the key", "--json", cwd=root,
                  home=home, env_extra={"NORMALIZE_CRASH_AT": "before_action@2"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert not (root / "key.txt").exists()
    task_id, = [p.name[:-5] for p in (home / "tasks").glob("*.json")]
    # the new process's model only says done: the key can come from the checkpoint alone
    (root / "script.json").write_text(json.dumps(["done wrote the key file"]))
    resumed = cli("resume", task_id, "--json", cwd=root, home=home)
    assert resumed.returncode == 0, resumed.stderr
    assert (root / "key.txt").read_text().rstrip("\n") == line
    shown = [crashed.stdout, crashed.stderr, resumed.stdout, resumed.stderr,
             (home / "tasks" / f"{task_id}.jsonl").read_text(),
             cli("tasks", "show", task_id, "--json", cwd=root, home=home).stdout]
    assert all(KEY not in text for text in shown)
    assert any("ANTHROPIC_API_KEY=[REDACTED]" in text for text in shown)
