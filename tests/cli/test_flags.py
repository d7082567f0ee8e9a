"""One meaning per flag: run, agent and resume spell and mean each shared flag the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from support.cli import cli

from normalize.cli.app import app

SHARED = [  # flag, its short form, the commands that take it
    ("--approve", None, ("run", "agent", "resume")),
    ("--max-turns", None, ("run", "agent", "resume")),
    ("--model", "-m", ("run", "agent", "resume")),
    ("--budget", None, ("agent", "resume")),
    ("--json", None, ("run", "agent", "resume")),
    ("--quiet", "-q", ("run", "agent", "resume")),
    ("--no-memory", None, ("run", "agent", "resume")),
]


def option(command: str, flag: str) -> Any:
    group: Any = typer.main.get_command(app)
    found = [p for p in group.commands[command].params if flag in p.opts]
    assert found, f"normalize {command} has no {flag}"
    return found[0]


@pytest.mark.parametrize(("flag", "short", "commands"), SHARED)
def test_a_shared_flag_has_one_spelling_and_one_help(flag: str, short: str | None,
                                                     commands: tuple[str, ...]) -> None:
    options = [option(c, flag) for c in commands]
    assert {tuple(sorted(o.opts)) for o in options} == {
        tuple(sorted([flag, *([short] if short else [])]))}
    assert len({o.help for o in options}) == 1, [o.help for o in options]
    assert len({(o.is_flag, o.metavar) for o in options}) == 1


def test_the_workspace_short_flag_never_means_anything_else() -> None:
    group: Any = typer.main.get_command(app)
    for name, command in group.commands.items():
        for param in getattr(command, "params", []):
            if "-w" in param.opts:
                assert "--workspace" in param.opts, name
    assert "-w" not in option("grep", "--workspace").opts  # grep's -w is --word


NOTES = ('[workflow]\nname = "notes"\n'
         + "".join(f'\n[[workflow.steps]]\nname = "s{n}"\naction = "note {n}"\n' for n in range(5)))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.toml").write_text(NOTES)
    replies = ["note a", "note b", "note c", "note d", "done all noted"]
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n\naddition = add\n")
    return tmp_path


def start(command: str, project: Path, home: Path, *flags: str) -> list[str]:
    if command == "run":
        return ["run", "notes.toml", *flags]
    if command == "agent":
        return ["agent", "take notes", "--model", "scripted:replies.json", *flags]
    first = cli("run", "notes.toml", "--max-turns", "1", "--json", cwd=project, home=home)
    task_id = json.loads(first.stdout.splitlines()[0])["task_id"]
    return ["resume", task_id, *flags]


@pytest.mark.parametrize("command", ["run", "agent", "resume"])
def test_approve_takes_the_same_modes_everywhere(command: str, project: Path,
                                                 normalize_home: Path) -> None:
    bad = cli(*start(command, project, normalize_home, "--approve", "maybe"), cwd=project,
              home=normalize_home)
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[0] == ("normalize: error: --approve maybe: unknown approval "
                                          "mode (choose from ask, auto, yes, never)")


@pytest.mark.parametrize("command", ["run", "agent", "resume"])
def test_max_turns_is_the_tasks_total_everywhere(command: str, project: Path,
                                                 normalize_home: Path) -> None:
    done = cli(*start(command, project, normalize_home, "--max-turns", "3", "--json"),
               cwd=project, home=normalize_home)
    ended = json.loads(done.stdout.splitlines()[-1])
    assert ended["status"] == "limit_reached", done.stderr
    assert ended["turns"] == 3  # resume too: 3 in all, not 3 more than the 1 already run


def test_resume_max_turns_below_what_ran_is_one_clear_line(project: Path,
                                                           normalize_home: Path) -> None:
    args = start("resume", project, normalize_home, "--max-turns", "1")
    late = cli(*args, cwd=project, home=normalize_home)
    assert late.returncode == 2
    assert late.stderr.splitlines()[0].endswith(
        "has already run 1 turns (--max-turns is the total, as in run and agent: give more "
        "than 1)")


def test_a_budget_stop_suggests_the_budget_flag(project: Path, normalize_home: Path) -> None:
    stopped = cli("run", "notes.toml", "--max-turns", "2", cwd=project, home=normalize_home)
    assert stopped.returncode == 3
    assert "resume with: normalize resume" in stopped.stderr
    assert "--max-turns 12" in stopped.stderr and "--budget" not in stopped.stderr


def test_grep_w_is_a_word_search(project: Path, normalize_home: Path) -> None:
    words = cli("grep", "-w", "add", cwd=project, home=normalize_home)
    assert words.returncode == 0, words.stderr
    assert "addition = add" in words.stdout and "def add(a, b):" in words.stdout
    after = cli("grep", "additio", "-w", ".", cwd=project, home=normalize_home)
    assert after.returncode == 1  # a word search for a part of a word finds nothing
    assert "no matches" in after.stdout


def test_resume_takes_m_for_model(project: Path, normalize_home: Path) -> None:
    args = start("resume", project, normalize_home, "--driver", "llm", "-m",
                 "scripted:replies.json", "--json")
    handed = cli(*args, cwd=project, home=normalize_home)
    assert handed.returncode == 0, handed.stderr
    events = [json.loads(line) for line in handed.stdout.splitlines()]
    assert events[0]["driver"] == "llm"


def test_a_person_continues_a_task_a_limit_stopped(project: Path, normalize_home: Path) -> None:
    args = start("resume", project, normalize_home, "--driver", "user")
    handed = cli(*args, cwd=project, home=normalize_home, input="view calc.py\ndone\n")
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert "def add(a, b):" in handed.stdout  # the command ran and its result is shown
