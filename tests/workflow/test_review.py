"""The built-in `review` workflow: the diff against a base ref in, findings as a checked JSON
result out (review.schema.json)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from normalize.contract.driver import DriverServices
from normalize.events import ActionFinished, BaseEvent
from normalize.runner import RunOptions, load_spec, parse_vars, run_task, start_task
from normalize.store import TaskStore
from normalize.testing import ScriptedModel

FINDINGS = {"verdict": "request_changes",
            "findings": [{"path": "calc.py", "line": 2, "severity": "error",
                          "message": "f now returns a string"}]}


def git(repo: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="a",
               GIT_AUTHOR_EMAIL="a@example.test", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@example.test")
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def test_review_reads_the_diff_never_edits_and_ends_with_findings(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("def f():\n    return 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "calc.py").write_text("def f():\n    return '1'\n")
    git(repo, "commit", "-q", "-am", "a string")
    model = ScriptedModel([
        "run git diff --no-color --no-ext-diff main...HEAD",
        "edit calc.py <<EOF\n<<<<<<< SEARCH\n    return '1'\n=======\n    return 1\n"
        ">>>>>>> REPLACE\nEOF",
        "done One error <<EOF\n" + json.dumps({**FINDINGS, "verdict": "maybe"}) + "\nEOF",
        f"done One error: f returns a string <<EOF\n{json.dumps(FINDINGS)}\nEOF"])
    events: list[BaseEvent] = []
    store = TaskStore(normalize_home, fsync=False)
    opts = RunOptions(workspace=repo, subscribers=[events.append], store=store, fsync=False,
                      services=DriverServices(model_factory=lambda spec, **_: model))
    spec = load_spec("review", repo, parse_vars(["base=main"]))
    outcome = run_task(start_task(spec, "mind the types", opts), opts)
    model.assert_done()
    assert outcome.status.value == "done", outcome.error
    assert outcome.task.result == FINDINGS and outcome.summary == "One error: f returns a string"
    first = model.requests[0].messages[0]["content"]
    text = first if isinstance(first, str) else json.dumps(first)
    assert "against main" in text and "main...HEAD" in text and "mind the types" in text
    assert "request_changes" in str(model.requests[0].system)  # told the schema
    retried = json.dumps(model.requests[3].messages)  # the invalid verdict went back
    assert "not accepted" in retried and "'maybe' is not one of" in retried
    ran = [e for e in events if isinstance(e, ActionFinished)]
    assert ran[0].status == "success" and "+    return '1'" in ran[0].preview
    assert ran[1].status == "blocked" and "deny pattern" in (ran[1].error or "")
    assert (repo / "calc.py").read_text() == "def f():\n    return '1'\n"
