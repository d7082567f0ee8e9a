"""`normalize agent` as a user runs it: keys, budgets, resuming, bad flags."""

from __future__ import annotations

import json
from pathlib import Path

from agent_helpers import KEYS, cli, json_lines

from normalize.testing.servers import FakeModelServer, Reply

KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
            "OPENAI_BASE_URL", "NORMALIZE_MODEL")


def test_missing_key_is_one_line_and_exit_2_before_any_task(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = cli("agent", "fix the type error", cwd=repo, home=home, drop=KEY_VARS)

    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("normalize: error: no API key")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "--model ollama:",
                 'driver = "user"', "normalize run FILE --goal TEXT"):
        assert name in line
    assert not (home / "tasks").exists() or not any((home / "tasks").iterdir())


def test_missing_openai_key_too(repo: Path, tmp_path: Path) -> None:
    done = cli("agent", "x", "--model", "openai:gpt-4.1", cwd=repo, home=tmp_path / "h",
               drop=KEY_VARS)
    assert done.returncode == 2
    assert "no API key for openai:gpt-4.1" in done.stderr and len(done.stderr.splitlines()) == 1


def test_budget_stops_with_exit_3_and_resume_with_more_budget_finishes(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    # the first turn costs 5000 input tokens at $3/Mtok: $0.015, over a $0.01 budget
    server.add(Reply("Looking first.\nview calc.py", usage={"input_tokens": 5000}),
               "done calc.py is readable")
    home = tmp_path / "home"
    env = {"ANTHROPIC_BASE_URL": server.url, **KEYS}
    first = cli("agent", "look at calc.py", "--budget", "0.01", "--quiet",
                "--model", "anthropic:claude-sonnet-4-5", cwd=repo, home=home, env=env)

    assert first.returncode == 3, first.stderr
    task_id = first.stderr.splitlines()[0].removeprefix("task ")
    assert f"resume with: normalize resume {task_id}" in first.stderr
    assert "limit reached" in first.stdout and "reached the budget" in first.stdout
    saved = json.loads((home / "tasks" / f"{task_id}.json").read_text())
    assert saved["status"] == "limit_reached" and saved["turn"] == 1
    assert saved["usage"]["cost_usd"] >= 0.015
    assert len(server.requests) == 1

    again = cli("resume", task_id, "--budget", "1", "--json", cwd=repo, home=home, env=env)
    assert again.returncode == 0, again.stderr
    events = json_lines(again.stdout)
    assert events[0]["resumed"] and events[-1]["status"] == "done"
    assert events[-1]["summary"] == "calc.py is readable"
    # the resumed prompt still shows what the first run saw
    assert "def mean(xs: list[int])" in server.requests[1].last_message
    server.assert_done()


def test_max_turns_stops_and_resume_max_turns_continues(repo: Path, server: FakeModelServer,
                                                        tmp_path: Path) -> None:
    server.add("view calc.py", "grep add", "done seen enough")
    home = tmp_path / "home"
    env = {"ANTHROPIC_BASE_URL": server.url, **KEYS}
    first = cli("agent", "look around", "--max-turns", "1", "--json", cwd=repo, home=home, env=env)
    assert first.returncode == 3
    task_id = json_lines(first.stdout)[0]["task_id"]
    again = cli("resume", task_id, "--max-turns", "5", "--json", cwd=repo, home=home, env=env)
    assert again.returncode == 0, again.stderr
    assert json_lines(again.stdout)[-1]["summary"] == "seen enough"


def test_scripted_model_file_and_context_flag(repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": ["view calc.py", "done looked"]}))
    done = cli("agent", "look", "--model", f"scripted:{script}", "--context", "conversation",
               "--json", cwd=repo, home=tmp_path / "home", drop=KEY_VARS)
    assert done.returncode == 0, done.stderr
    events = json_lines(done.stdout)
    assert events[-1]["summary"] == "looked"


def test_repo_map_flag_puts_the_map_in_the_prompt(repo: Path, server: FakeModelServer,
                                                  tmp_path: Path) -> None:
    server.add("done looked", "done looked again")
    env = {"ANTHROPIC_BASE_URL": server.url, **KEYS}
    for flag in (("--repo-map", "512"), ()):
        done = cli("agent", "look", *flag, "--quiet", cwd=repo, home=tmp_path / "home", env=env)
        assert done.returncode == 0, done.stderr
    mapped, plain = (r.body["system"][0]["text"] for r in server.requests)
    assert "## Repo map" in mapped and "def mean(xs: list[int]) -> float:" in mapped
    assert "## Repo map" not in plain


def test_bad_flags_are_one_line_errors(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args, expected in (
        (("--context", "everything"), "--context everything: unknown strategy"),
        (("--model", "nosuch-model"), "cannot tell which provider"),
        (("--budget", "0"), "--budget 0: must be more than 0"),
        (("--workspace", str(tmp_path / "missing")), "not a directory"),
        (("--workflow", "no-such-flow"), "no such workflow"),
        (("--repo-map", "-5"), "--repo-map -5: must be from 0 to 16384"),
    ):
        done = cli("agent", "x", *args, cwd=repo, home=home, env=KEYS)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_help_lists_the_agent_without_loading_the_sdk(repo: Path, tmp_path: Path) -> None:
    done = cli("agent", "--help", cwd=repo, home=tmp_path)
    assert done.returncode == 0
    for flag in ("--model", "--base-url", "--max-turns", "--budget", "--approve", "--context",
                 "--workflow", "--json", "--quiet", "--workspace"):
        assert flag in done.stdout
