"""A structured result as a person sees it: after the summary at a terminal, and in `tasks show`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from cli_helpers import NORMALIZE, cli_env, run_in_pty, strip_ansi

FINDINGS = {"verdict": "request_changes",
            "findings": [{"path": "calc.py", "line": 2, "severity": "error",
                          "message": "f now returns a string"},
                         {"path": "calc.py", "severity": "note", "message": "no tests"}]}


def git(repo: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="a",
               GIT_AUTHOR_EMAIL="a@example.test", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@example.test")
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def branch_to_review(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("def f():\n    return 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "calc.py").write_text("def f():\n    return '1'\n")
    git(repo, "commit", "-q", "-am", "a string")
    return repo


def script(tmp_path: Path, *replies: str) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def test_run_review_shows_its_findings_after_the_summary(tmp_path: Path) -> None:
    repo = branch_to_review(tmp_path)
    model = script(tmp_path, "run git diff --no-color --no-ext-diff main...HEAD",
                   f"done One error: f returns a string <<EOF\n{json.dumps(FINDINGS)}\nEOF")
    status, out, err = run_in_pty([*NORMALIZE, "run", "review", "--var", "base=main",
                                   "--model", model], cli_env(), repo)
    assert status == 0, err
    shown = strip_ansi(out).splitlines()
    panel_end = max(i for i, line in enumerate(shown) if line.startswith("╰"))
    assert any("One error: f returns a string" in line for line in shown[:panel_end])
    assert [line.rstrip() for line in shown[panel_end + 1:panel_end + 4]] == [
        "verdict: request_changes",
        "calc.py:2: error: f now returns a string",
        "calc.py: note: no tests",
    ]

    tasks = subprocess.run([*NORMALIZE, "tasks", "show", "last"], cwd=repo, env=cli_env(),
                           capture_output=True, text=True, timeout=60, check=True).stdout
    lines = tasks.splitlines()
    at = lines.index("  result:")
    assert lines[at + 1:at + 4] == ["    verdict: request_changes",
                                    "    calc.py:2: error: f now returns a string",
                                    "    calc.py: note: no tests"]


def test_agent_output_schema_shows_its_result_as_json(tmp_path: Path) -> None:
    (tmp_path / "count.schema.json").write_text(json.dumps({
        "type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}))
    (tmp_path / "a.py").write_text("x = 1\n")
    model = script(tmp_path, 'done Counted the files <<EOF\n{"count": 4}\nEOF')
    status, out, err = run_in_pty([*NORMALIZE, "agent", "--model", model, "--output-schema",
                                   "count.schema.json", "count the files"],
                                  cli_env(), tmp_path)
    assert status == 0, err
    shown = [line.rstrip() for line in strip_ansi(out).splitlines()]
    panel_end = max(i for i, line in enumerate(shown) if line.startswith("╰"))
    assert shown[panel_end + 1:panel_end + 4] == ["{", '  "count": 4', "}"]

    piped = subprocess.run([*NORMALIZE, "tasks", "show", "last"], cwd=tmp_path,
                           env=cli_env(), capture_output=True, text=True, timeout=60,
                           check=True).stdout.splitlines()
    at = piped.index("  result:")
    assert piped[at + 1:at + 4] == ["    {", '      "count": 4', "    }"]
