"""Must-show 1: a scripted agent calls mcp-server-time and mcp-server-git; both are recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_helpers import cli, git_repo, git_server, time_server, write_config

from normalize.contract.driver import DriverServices
from normalize.events import BaseEvent
from normalize.redact import Redactor
from normalize.retry import RetryPolicy
from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.testing import ScriptedModel

FAST = RetryPolicy(strategy="none")


def home_of(store: TaskStore) -> Path:
    return Path(store.home)


def run_scripted(workspace: Path, home: Path, *replies: str, **options: Any
                 ) -> tuple[ScriptedModel, TaskStore, str, list[BaseEvent]]:
    model = ScriptedModel(list(replies), model="test")
    store = TaskStore(home, fsync=False, redact=Redactor.for_workspace(workspace))  # as the CLI
    events: list[BaseEvent] = []
    opts = RunOptions(workspace=workspace, subscribers=[events.append], store=store, fsync=False,
                      services=DriverServices(model_factory=lambda spec, **_: model,
                                              model_retry=FAST), **options)
    spec = load_spec("dwim", workspace)
    spec.llm = {**(spec.llm or {}), "fallback": []}
    task = start_task(spec, "report the time and the repository status", opts)
    run_task(task, opts)
    return model, store, task.id, events


def test_an_agent_calls_third_party_servers_and_sees_their_results(
        tmp_path: Path, normalize_home: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    write_config(normalize_home, time_server(), git_server(repo))
    model, store, task_id, _ = run_scripted(
        repo, normalize_home,
        "Checking the time and the repository.\n"
        "mcp time get_current_time timezone=Europe/Paris\n"
        f"mcp git git_status repo_path={repo}",
        "done Paris time and the status are known")
    model.assert_done()
    system = model.requests[0].system
    assert "## MCP tools" in system
    assert "- mcp time get_current_time timezone=STRING: Get current time" in system
    assert "mcp git git_status repo_path=STRING" in system
    assert "(read-only)" in system and "changes things; may need approval" in system  # git_add

    second = str(model.requests[1].messages)
    assert '"timezone": "Europe/Paris"' in second  # the time server's answer
    assert "notes.txt" in second and "Untracked files" in second  # git status of the repo

    task = store.load(task_id)
    assert task.status.value == "done"
    journal = list(store.events(task_id))
    started = [e for e in journal if e["type"] == "action_started" and e["tool"] == "mcp"]
    finished = [e for e in journal if e["type"] == "action_finished" and e["tool"] == "mcp"]
    assert [e["action"]["params"]["args"][:2] for e in started] == [
        ["time", "get_current_time"], ["git", "git_status"]]
    assert [e["status"] for e in finished] == ["success", "success"]
    assert [e["data"]["tool"] for e in finished] == ["get_current_time", "git_status"]
    assert all(e["read_only"] is False for e in started)  # journaled as side effects
    assert any(e["type"] == "process_started" for e in journal)  # the servers' pids
    shown = cli("tasks", "show", task_id, cwd=repo, home=home_of(store))
    assert shown.returncode == 0, shown.stderr
    assert "✓ mcp time get_current_time timezone=Europe/Paris" in shown.stdout
    assert "✓ mcp git git_status repo_path=" in shown.stdout  # (a long path is cut)


KEY = "sk-ant-api03-" + "Zq9_" * 12


def test_long_results_are_previewed_and_cached_and_secrets_redacted_in_the_journal(
        tmp_path: Path, normalize_home: Path) -> None:
    from mcp_helpers import fixture_server

    root = tmp_path / "ws"
    root.mkdir()
    write_config(normalize_home, fixture_server("fx", timeout=30))
    model, store, task_id, _ = run_scripted(
        root, normalize_home,
        f"Two echoes.\nmcp fx echo text={KEY}\nmcp fx echo text=word times=5000",
        "done echoed")
    model.assert_done()
    journal_text = store.journal_path(task_id).read_text()
    assert KEY not in journal_text and "[REDACTED]" in journal_text
    finished = [e for e in store.events(task_id) if e["type"] == "action_finished"]
    long = finished[1]
    assert long["status"] == "success" and long["cache_id"]
    assert len(long["preview"]) < 5000 * 5
    assert str(long["cache_id"]) in str(model.requests[1].messages)  # the model may fetch it
