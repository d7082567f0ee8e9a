"""A person at the `--driver user` prompt sees every result whole, and no model limit binds them.

Driven through prompt-toolkit's pipe input, as a person would type.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from normalize.cli.prompt import PromptReader
from normalize.cli.render import LiveRenderer, PlainRenderer, Results, cache_reader
from normalize.contract.driver import DriverServices
from normalize.runner import RunOptions, hand_over, load_spec, run_task, start_task
from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

FORTY = "".join(f"line_{n:02d} = {n}\n" for n in range(1, 41))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "forty.py").write_text(FORTY)
    (root / ".git").mkdir()
    return root


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    with create_pipe_input() as inp:
        yield inp


def console(height: int = 60, width: int = 100) -> Console:
    return Console(file=io.StringIO(), width=width, height=height, force_terminal=False,
                   color_system=None, legacy_windows=False, _environ={})


def screen(con: Console) -> list[str]:
    file = con.file
    assert isinstance(file, io.StringIO)
    return [line.rstrip() for line in file.getvalue().splitlines()]


def person(project: Path, home: Path, pipe: PipeInput, typed: str, renderer: object,
           task: Task | None = None) -> tuple[Task, object]:
    """Run `task` (a new user-driven one by default) with a person typing `typed`."""
    store = TaskStore(home, fsync=False)
    reader = PromptReader(project, history=home / "history", input=pipe, output=DummyOutput())
    pipe.send_text(typed)
    options = RunOptions(workspace=project, store=store, subscribers=[renderer],
                         approve="yes", services=DriverServices(read_line=reader))
    if isinstance(renderer, LiveRenderer | PlainRenderer):
        renderer.results.full_text = cache_reader(lambda: store)
    task = task or Task.new(goal="look around", workspace=str(project), driver="user")
    outcome = run_task(task, options, resumed=task.turn > 0)
    close = getattr(renderer, "close", None)
    if close is not None:
        close()
    return task, outcome


def test_view_of_a_forty_line_file_shows_all_forty_lines(project: Path, normalize_home: Path,
                                                        pipe: PipeInput) -> None:
    con = console(height=60)
    person(project, normalize_home, pipe, "view forty.py\rdone\r",
           LiveRenderer(con, auto_refresh=False))
    shown = "\n".join(screen(con))
    for n in range(1, 41):
        assert f"line_{n:02d} = {n}" in shown, shown
    assert "more lines" not in shown


def test_plain_output_shows_the_same_whole_result(project: Path, normalize_home: Path,
                                                  pipe: PipeInput) -> None:
    out = io.StringIO()
    person(project, normalize_home, pipe, "view forty.py\rdone\r",
           PlainRenderer(out, results=Results(rows=lambda: 60)))
    shown = out.getvalue()
    assert all(f"line_{n:02d} = {n}" in shown for n in range(1, 41)), shown
    assert "fetch" not in shown


def test_a_result_taller_than_the_terminal_is_cut_with_the_id_to_fetch(
        project: Path, normalize_home: Path, pipe: PipeInput) -> None:
    con = console(height=20)
    person(project, normalize_home, pipe, "view forty.py\rdone\r",
           LiveRenderer(con, auto_refresh=False))
    shown = screen(con)
    cut = next(line for line in shown if "more lines" in line)
    assert "line_15 = 15" in "\n".join(shown) and "line_16 = 16" not in "\n".join(shown)
    assert cut.startswith("… 25 more lines — `fetch ") and cut.endswith("` shows all")


def test_run_output_shows_whole(project: Path, normalize_home: Path, pipe: PipeInput) -> None:
    con = console(height=60)
    person(project, normalize_home, pipe, "run seq 1 30\rdone\r",
           LiveRenderer(con, auto_refresh=False))
    shown = screen(con)
    assert [line for line in shown if line.strip().isdigit()] == [str(n) for n in range(1, 31)]


def test_resume_with_the_user_driver_after_a_max_turns_stop_accepts_commands(
        project: Path, normalize_home: Path, pipe: PipeInput) -> None:
    flow = project / "slow.toml"
    flow.write_text('[workflow]\nname = "slow"\n[workflow.limits]\nmax_turns = 1\n'
                    + "".join(f'\n[[workflow.steps]]\nname = "s{n}"\naction = "note {n}"\n'
                              for n in range(3)))
    store = TaskStore(normalize_home, fsync=False)
    options = RunOptions(workspace=project, store=store)
    task = start_task(load_spec(str(flow), project, {}), "", options)
    stopped = run_task(task, options)
    assert stopped.status is TaskStatus.LIMIT  # the workflow's own limit stopped it
    task = store.load(task.id)
    hand_over(task, "user")
    con = console(height=60)
    _, outcome = person(project, normalize_home, pipe, "view forty.py\r\x04",
                        LiveRenderer(con, auto_refresh=False), task=task)
    assert outcome.status is TaskStatus.DONE, screen(con)  # type: ignore[attr-defined]
    assert "line_40 = 40" in "\n".join(screen(con))
    assert store.load(task.id).actions_run == 2  # the workflow's note, then the person's view
