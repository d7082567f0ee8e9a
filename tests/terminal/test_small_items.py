"""The smaller things a person ran into (issue 14), each as they see it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from support.cli import cli

from normalize.cli.complete import drivers, resumable_task_ids, task_ids
from normalize.cli.describe import action_change
from normalize.cli.render import LiveRenderer, action_line
from normalize.events import ActionFinished, ActionStarted, Emitter, RunStarted
from normalize.execution.cache import build_preview
from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

DEMO = ('[workflow]\nname = "demo"\n\n[[workflow.steps]]\nname = "look"\n'
        'action = "view calc.py"\n')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "demo.toml").write_text(DEMO)
    return tmp_path


def failing(root: Path) -> Path:
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 4\n")
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    return root


def test_version(project: Path, normalize_home: Path) -> None:
    done = cli("--version", cwd=project, home=normalize_home)
    assert done.returncode == 0
    assert done.stdout.startswith("normalize 0.")


def test_help_alone_lists_the_topics(project: Path, normalize_home: Path) -> None:
    done = cli("help", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    assert "  commands   the command language" in done.stdout


def test_a_mistyped_command_says_did_you_mean_on_its_first_line(project: Path,
                                                                normalize_home: Path) -> None:
    done = cli("rn", "health", cwd=project, home=normalize_home)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == ("normalize: error: no such command 'rn'. "
                                           "Did you mean 'run'?")


def test_an_ascii_terminal_gets_escapes_not_a_crash(project: Path,
                                                    normalize_home: Path) -> None:
    done = cli("run", "check", cwd=failing(project), home=normalize_home,
               env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1, done.stderr
    assert "UnicodeEncodeError" not in done.stdout + done.stderr
    assert "\\u2717 test" in done.stdout  # ✗, written as an escape


def test_grep_with_no_match_exits_1(project: Path, normalize_home: Path) -> None:
    none = cli("grep", "nowhere_to_be_found", cwd=project, home=normalize_home)
    assert none.returncode == 1
    found = cli("grep", "add", cwd=project, home=normalize_home)
    assert found.returncode == 0


def test_a_terminal_failed_state_does_not_suggest_resume(project: Path,
                                                         normalize_home: Path) -> None:
    done = cli("run", "check", cwd=failing(project), home=normalize_home)
    assert done.returncode == 1
    assert "resume" not in done.stderr  # the machine ended where it meant to: nothing to resume


def test_dry_run_json_is_one_json_object(project: Path, normalize_home: Path) -> None:
    done = cli("run", "demo.toml", "--dry-run", "--json", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    plan = json.loads(line)
    assert plan["dry_run"] is True and plan["spec"]["name"] == "demo"
    assert any("view calc.py" in step for step in plan["plan"])


def test_workflows_show_json_is_one_line(project: Path, normalize_home: Path) -> None:
    done = cli("workflows", "show", "health", "--json", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert json.loads(line)["name"] == "health"


@pytest.mark.parametrize(("verb", "usage"), [
    ("view", "Usage: normalize view [OPTIONS] PATH[:START-END|/SYMBOL]"),
    ("grep", "Usage: normalize grep [OPTIONS] PATTERN [PATH]"),
])
def test_the_verbs_help_shows_their_arguments_and_one_json_object(
        verb: str, usage: str, project: Path, normalize_home: Path) -> None:
    done = cli(verb, "--help", cwd=project, home=normalize_home)
    assert done.stdout.splitlines()[0].startswith(usage)
    assert "a verb's result, one JSON object" in done.stdout  # (--json's one help says so)
    assert "event per line" not in done.stdout


def test_the_task_id_is_printed_once_at_start(project: Path, normalize_home: Path) -> None:
    done = cli("run", "demo.toml", cwd=project, home=normalize_home)
    assert done.returncode == 0
    tier = "normalize: notice: sandbox tier landlock"  # on machines without namespaces
    rest = [line for line in done.stderr.splitlines() if not line.startswith(tier)]
    assert rest == []  # the run's first line names the task; nothing else repeats it
    assert done.stdout.splitlines()[0].endswith("started: demo (workflow)")


def test_tasks_list_cuts_the_goal_with_an_ellipsis_and_shows_the_workspace(
        project: Path, normalize_home: Path) -> None:
    store = TaskStore(normalize_home, fsync=False)
    store.save(Task.new(goal="g" * 300, workspace=str(project), driver="user"))
    done = cli("tasks", cwd=project, home=normalize_home, env={"COLUMNS": "100"})
    header, row = done.stdout.splitlines()[:2]
    assert "WORKSPACE" in header
    assert row.endswith("g…") and len(row) <= 100
    cell = row.split()[5]  # ID STATUS DRIVER "0s ago" WORKSPACE GOAL
    assert cell.startswith("…") and str(project).endswith(cell[1:])


def test_completion_offers_resumable_tasks_and_driver_names(normalize_home: Path,
                                                           project: Path) -> None:
    store = TaskStore(normalize_home, fsync=False)
    open_task = Task.new(goal="open", workspace=str(project), driver="user")
    finished = Task.new(goal="finished", workspace=str(project), driver="user")
    finished.status = TaskStatus.DONE
    store.save(open_task)
    store.save(finished)
    assert set(task_ids("")) == {"last", open_task.id, finished.id}  # show and rm: all
    assert set(resumable_task_ids("")) == {"last", open_task.id}  # resume: not the done one
    assert drivers("") == ["user", "llm", "workflow", "state_machine", "claude", "codex", "aider",
                           "acp"]
    assert drivers("u") == ["user"]


def test_replay_last_replays_the_task_before_this_one(project: Path,
                                                      normalize_home: Path) -> None:
    (project / "replies.json").write_text(json.dumps(["note from the script", "done noted"]))
    first = cli("agent", "take a note", "-m", "scripted:replies.json", "--json", cwd=project,
                home=normalize_home)
    assert first.returncode == 0, first.stderr
    again = cli("agent", "take it again", "-m", "replay:last", "--json", cwd=project,
                home=normalize_home)
    assert again.returncode == 0, again.stderr
    ended = json.loads(again.stdout.splitlines()[-1])
    assert ended["summary"] == "noted"


def test_a_successful_analysis_is_not_labelled_errors() -> None:
    lines = ["3 files, 120 lines in .", "languages:",
             *(f"  Lang{n}   1 files   {n} lines" for n in range(25)),
             "TODO/FIXME/XXX/HACK: 4", *(f"  pkg/mod{n}.py:{n}: # TODO later" for n in range(4))]
    preview = build_preview("\n".join(lines), "c1")
    assert preview.startswith("errors (")  # the preview's own heuristic
    event = ActionFinished(task_id="t", tool="analyze", command="analyze --health",
                           status="success", preview=preview, cache_id="c1")
    assert action_change(event) == "3 files, 120 lines in ."
    assert "errors" not in action_line(event).plain


def test_the_spinner_turns() -> None:
    now = [0.0]
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None,
                      get_time=lambda: now[0], _environ={})
    renderer = LiveRenderer(console, auto_refresh=False, clock=lambda: now[0])
    emitter = Emitter("abc12345")
    emitter.subscribe(renderer)
    emitter.emit(RunStarted(task_id="abc12345", goal="g", driver="workflow"))
    emitter.emit(ActionStarted(task_id="abc12345", key="k", tool="run", command="run sleep 9"))
    frames = []
    for _ in range(3):
        frames.append(_first_char(renderer, console))
        now[0] += 0.25
    renderer.close()
    assert len(set(frames)) > 1, frames


def _first_char(renderer: LiveRenderer, console: Console) -> str:
    with console.capture() as capture:
        console.print(renderer.view())
    line = next(ln for ln in capture.get().splitlines() if "run sleep 9" in ln)
    return line.strip()[0]


def test_a_flows_outcome_prints_short() -> None:
    from normalize.engine import ExitStatus, RunOutcome

    task = Task.new(goal="x" * 5000, workspace="/", driver="user")
    shown = repr(RunOutcome(task, TaskStatus.DONE, ExitStatus.DONE, summary="ok"))
    assert len(shown) < 200 and "DONE" in shown and "xxxx" not in shown


def test_a_question_is_shown_once(project: Path, normalize_home: Path) -> None:
    (project / "ask.toml").write_text('[workflow]\nname = "asking"\n\n[[workflow.steps]]\n'
                                      'name = "q"\naction = "ask Which colour?"\n')
    done = cli("run", "ask.toml", cwd=project, home=normalize_home)
    assert done.returncode == 4
    assert (done.stdout + done.stderr).count("Which colour?") == 1, done.stdout + done.stderr
    assert "continue with: normalize resume" in done.stdout


def test_time_at_an_approval_prompt_is_not_the_actions() -> None:
    now = [0.0]
    console = Console(file=io.StringIO(), width=80, force_terminal=False, color_system=None,
                      get_time=lambda: now[0], _environ={})
    renderer = LiveRenderer(console, auto_refresh=False, clock=lambda: now[0])
    emitter = Emitter("abc12345")
    emitter.subscribe(renderer)
    emitter.emit(RunStarted(task_id="abc12345", goal="g", driver="llm"))
    emitter.emit(ActionStarted(task_id="abc12345", key="k", tool="run", command="run rm x"))
    now[0] = 1.0
    with renderer.hold():  # the approval prompt: a person thinks for ten seconds
        now[0] = 11.0
    now[0] = 12.0
    with console.capture() as capture:
        console.print(renderer.view())
    renderer.close()
    assert "run rm x  2.0s" in capture.get(), capture.get()


def test_scripted_replies_go_on_from_where_a_resumed_task_stopped(
        project: Path, normalize_home: Path) -> None:
    (project / "replies.json").write_text(json.dumps(["note one", "note two", "done both"]))
    first = cli("agent", "take notes", "-m", "scripted:replies.json", "--max-turns", "1",
                "--json", cwd=project, home=normalize_home)
    assert first.returncode == 3, first.stderr
    task_id = json.loads(first.stdout.splitlines()[0])["task_id"]
    again = cli("resume", task_id, "--max-turns", "5", "--json", cwd=project,
                home=normalize_home)
    assert again.returncode == 0, again.stderr
    events = [json.loads(line) for line in again.stdout.splitlines()]
    ran = [e["command"] for e in events if e["type"] == "action_finished"]
    assert ran == ["note two"]  # not "note one" again
    assert events[-1]["summary"] == "both"


def test_workflows_validate_reports_every_broken_step_at_once(project: Path,
                                                              normalize_home: Path) -> None:
    (project / "bad.toml").write_text(
        '[workflow]\nname = "bad"\n\n[[workflow.steps]]\nname = "a"\naction = "frobnicate x"\n'
        '\n[[workflow.steps]]\nname = "b"\naction = "view {nope}"\n'
        '\n[[workflow.steps]]\nname = "c"\naction = "view calc.py"\n')
    done = cli("workflows", "validate", "bad.toml", cwd=project, home=normalize_home)
    assert done.returncode == 2
    problems = done.stderr.splitlines()
    assert len(problems) == 2, done.stderr
    assert ":6:" in problems[0] and "frobnicate" in problems[0]
    assert ":10:" in problems[1] and "{nope}" in problems[1]
