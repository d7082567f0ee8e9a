"""A file name that is not valid UTF-8: the task keeps it exactly, the model gets valid text."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from agent_helpers import KEYS, cli

from normalize.store import TaskStore
from normalize.testing.servers import FakeModelServer

ODD = b"caf\xe9.py"  # Latin-1 bytes: os.fsdecode gives a lone surrogate


def _walk(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _walk(v)]
    if isinstance(value, list):
        return [s for v in value for s in _walk(v)]
    return []


def test_a_non_utf8_file_name_survives_the_task_the_journal_and_the_request(
        repo: Path, normalize_home: Path, server: FakeModelServer) -> None:
    with open(os.path.join(os.fsencode(repo), ODD), "w") as fh:
        fh.write("x = 1\n")
    server.add("Looking.\nview .", "Searching.\ngrep 'x = 1'",
               "Noting it.\nwrite notes.txt <<EOF\nseen\nEOF", "done looked")
    env = {**KEYS, "ANTHROPIC_BASE_URL": server.url}
    run = cli("agent", "look at the files", "--json", cwd=repo, home=normalize_home, env=env)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr
    server.assert_done()
    for request in server.requests:  # what reached the provider is valid UTF-8 JSON
        json.dumps(request.body, ensure_ascii=False).encode()
    assert "caf" in server.requests[2].last_message
    found = re.search(r"task ([0-9a-f]{8})", run.stderr)
    assert found is not None
    task = TaskStore(normalize_home).load(found.group(1))
    name = os.fsdecode(ODD)
    assert any(name in text for text in _walk(task.to_dict())), "the exact name is kept"
    shown = cli("tasks", "show", found.group(1), cwd=repo, home=normalize_home)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    diff = cli("diff", found.group(1), "--stat", cwd=repo, home=normalize_home)
    assert diff.returncode == 0, diff.stderr
