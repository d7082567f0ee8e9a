"""Driver hand-over (model → person, person → model) and a crash in the middle of a model stream."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from durability_support import (
    append_action,
    cli,
    journal,
    json_lines,
    log_lines,
    only_task,
    task_file,
)


def scripted_agent(tmp_path: Path, replies: list[str]) -> Path:
    (tmp_path / "script.json").write_text(json.dumps(replies))
    flow = tmp_path / "agent.toml"
    flow.write_text('[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "scripted"\n'
                    'model = "script.json"\n[workflow.permissions]\nmode = "yes"\n')
    return flow


def test_a_task_started_by_a_model_is_finished_by_a_person_with_piped_input(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = scripted_agent(tmp_path, [f"Recording the start.\n{append_action('model')}"])
    started = cli("run", str(flow), "--goal", "fill the log", "--max-turns", "1", "--json",
                  cwd=tmp_path, home=normalize_home)
    assert started.returncode == 3, started.stderr  # the model used its one turn
    task_id = only_task(normalize_home)
    assert task_file(normalize_home, task_id)["driver"] == "llm"

    typed = f"{append_action('person')}\nview log.txt\ndone finished by hand\n"
    handed = cli("resume", task_id, "--driver", "user", "--max-turns", "5", "--json",
                 cwd=tmp_path, home=normalize_home, input=typed)
    assert handed.returncode == 0, handed.stderr
    assert f"task {task_id}: handing over from llm to user at turn 1" in handed.stderr
    events = json_lines(handed.stdout)
    assert events[0]["type"] == "run_started" and events[0]["driver"] == "user"
    notices = [e["message"] for e in events if e["type"] == "notice"]
    assert any("the user driver takes over this task from llm" in n for n in notices)
    assert events[-1]["status"] == "done" and events[-1]["summary"] == "finished by hand"
    assert log_lines(tmp_path) == ["model", "person"]  # the model's effect ran once
    saved = task_file(normalize_home, task_id)
    assert saved["driver"] == "user" and set(saved["driver_states"]) == {"llm", "user"}


def test_a_task_started_by_a_person_is_continued_by_a_model(tmp_path: Path,
                                                             normalize_home: Path) -> None:
    flow = tmp_path / "by-hand.toml"
    flow.write_text('[workflow]\nname = "by-hand"\ndriver = "user"\n'
                    '[workflow.permissions]\nmode = "yes"\n')
    started = cli("run", str(flow), "--goal", "fill the log", "--max-turns", "1",
                  cwd=tmp_path, home=normalize_home, input=append_action("person") + "\n")
    assert started.returncode == 3, started.stdout + started.stderr
    task_id = only_task(normalize_home)
    (tmp_path / "script.json").write_text(json.dumps(
        [f"I add my line.\n{append_action('model')}", "done added my line"]))
    handed = cli("resume", task_id, "--driver", "llm", "--model", "scripted:script.json",
                 "--max-turns", "5", "--json", cwd=tmp_path, home=normalize_home)
    assert handed.returncode == 0, handed.stderr
    events = json_lines(handed.stdout)
    assert events[0]["driver"] == "llm"
    assert [e["type"] for e in events].count("model_replied") == 2
    assert events[-1]["status"] == "done"
    assert log_lines(tmp_path) == ["person", "model"]
    assert task_file(normalize_home, task_id)["driver"] == "llm"


def test_an_unknown_driver_for_a_hand_over_is_one_clear_line(tmp_path: Path,
                                                             normalize_home: Path) -> None:
    flow = scripted_agent(tmp_path, ["view ."])
    cli("run", str(flow), "--max-turns", "1", cwd=tmp_path, home=normalize_home)
    task_id = only_task(normalize_home)
    before = (normalize_home / "tasks" / f"{task_id}.json").read_bytes()
    proc = cli("resume", task_id, "--driver", "robot", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(
        "normalize: error: --driver robot: unknown driver (known: ")
    assert (normalize_home / "tasks" / f"{task_id}.json").read_bytes() == before


def test_a_crash_in_the_middle_of_a_model_stream_makes_the_request_again(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps([
        f"Adding the model's line now, as asked.\n{append_action('model')}",
        "done added both lines"]))
    flow = tmp_path / "flow.toml"
    flow.write_text(f"""
[workflow]
name = "first-then-model"
[workflow.llm]
provider = "scripted"
model = "script.json"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "first"
action = '''{append_action("first")}'''
[[workflow.steps]]
name = "model"
action = "llm-decide add the model's line to log.txt"
""")
    crashed = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home,
                  crash="model_stream")
    assert crashed.returncode == -signal.SIGKILL
    streamed = [e for e in json_lines(crashed.stdout) if e["type"] == "text_delta"]
    # what was out when it died is a prefix of the reply (the emitter holds back a
    # short tail of every stream for redaction, so it may be nothing yet)
    reply = f"Adding the model's line now, as asked.\n{append_action('model')}"
    assert reply.startswith("".join(e["text"] for e in streamed))
    task_id = only_task(normalize_home)
    before = [e["type"] for e in journal(normalize_home, task_id)]
    assert "model_replied" not in before and "text_delta" not in before  # no partial turn

    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    replies = [e for e in journal(normalize_home, task_id) if e["type"] == "model_replied"]
    assert [r["text"].splitlines()[0] for r in replies] == [
        "Adding the model's line now, as asked.", "done added both lines"]
    assert log_lines(tmp_path) == ["first", "model"]  # each effect once
