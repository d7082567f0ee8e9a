"""The user driver at a prompt-toolkit prompt, driven through a pipe input."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import make_console, output, strip_ansi
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from normalize.cancel import CancelToken
from normalize.cli.prompt import CommandCompleter, PromptReader
from normalize.cli.render import LiveRenderer
from normalize.contract.driver import DriverServices
from normalize.errors import ExitStatus
from normalize.runner import RunOptions, run_task
from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

CALC = '''class Calc:
    """A calculator."""

    def add(self, a: int, b: int) -> int:
        return a - b

    def mean(self, xs: list[int]) -> float:
        return sum(xs) / len(xs)


def helper() -> None:
    pass
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "pkg" / "core.py").write_text("X = 1\n")
    (root / ".git").mkdir()
    return root


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    with create_pipe_input() as inp:
        yield inp


def drive(project: Path, home: Path, pipe: PipeInput, typed: str, *,
          cancel: CancelToken | None = None) -> tuple[object, str, str]:
    """Run a user-driven task whose person types `typed`: (outcome, screen, help output)."""
    cancel = cancel or CancelToken()
    console = make_console(terminal=False, width=100)
    renderer = LiveRenderer(console, auto_refresh=False)
    out = io.StringIO()
    reader = PromptReader(project, history=home / "history", out=out, hold=renderer.hold,
                          on_interrupt=lambda: cancel.cancel("stopped by Ctrl-C"),
                          input=pipe, output=DummyOutput())
    pipe.send_text(typed)
    options = RunOptions(workspace=project, store=TaskStore(home, fsync=False), cancel=cancel,
                         subscribers=[renderer], services=DriverServices(read_line=reader))
    task = Task.new(goal="fix Calc.add", workspace=str(project), driver="user")
    outcome = run_task(task, options)
    renderer.close()
    return outcome, strip_ansi(output(console)), out.getvalue()


EDIT = ("edit calc.py <<EOF\r<<<<<<< SEARCH\r        return a - b\r=======\r"
        "        return a + b\r>>>>>>> REPLACE\rEOF\r")


def test_view_edit_done_changes_the_file(project: Path, normalize_home: Path,
                                         pipe: PipeInput) -> None:
    outcome, screen, _ = drive(project, normalize_home, pipe,
                               f"view calc.py/Calc/add\r{EDIT}done fixed Calc.add\r")
    assert outcome.status is TaskStatus.DONE  # type: ignore[attr-defined]
    assert "return a + b" in (project / "calc.py").read_text()
    assert "return a - b" not in (project / "calc.py").read_text()
    shown = [line.rstrip() for line in screen.splitlines()]
    assert "✓ view calc.py/Calc/add" in shown[1]
    assert "def add(self, a: int, b: int) -> int:" in shown[2]  # the result, shown whole
    edited = next(line for line in shown if line.startswith("✓ edit calc.py"))
    assert edited.endswith("+1 -1")
    assert "    -        return a - b" in shown and "    +        return a + b" in shown
    assert "fixed Calc.add" in screen  # the summary panel
    history = (normalize_home / "history").read_text()
    assert "+view calc.py/Calc/add" in history and "+done fixed Calc.add" in history


def test_help_prints_the_command_reference_and_asks_again(project: Path, normalize_home: Path,
                                                         pipe: PipeInput) -> None:
    outcome, _, help_text = drive(project, normalize_home, pipe, "help\rdone\r")
    assert outcome.status is TaskStatus.DONE  # type: ignore[attr-defined]
    assert help_text.startswith("COMMANDS\n")
    assert "edit (also: patch, fix, replace) - changes things" in help_text
    assert "Ctrl-D" in help_text


def test_ctrl_d_finishes(project: Path, normalize_home: Path, pipe: PipeInput) -> None:
    outcome, screen, _ = drive(project, normalize_home, pipe, "view pkg\r\x04")
    assert outcome.status is TaskStatus.DONE  # type: ignore[attr-defined]
    assert "✓ view pkg" in screen
    assert "input ended" in screen


def test_ctrl_c_at_the_prompt_stops_the_run(project: Path, normalize_home: Path,
                                            pipe: PipeInput) -> None:
    outcome, _, _ = drive(project, normalize_home, pipe, "\x03")
    assert outcome.status is TaskStatus.INTERRUPTED  # type: ignore[attr-defined]
    assert outcome.exit_status is ExitStatus.INTERRUPTED  # type: ignore[attr-defined]


def complete(project: Path, text: str) -> list[str]:
    completer = CommandCompleter(project)
    found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
    return [text[: len(text) + c.start_position] + c.text for c in found]


def test_the_first_word_completes_to_verbs(project: Path) -> None:
    assert complete(project, "vi") == ["view"]
    assert complete(project, "ed") == ["edit"]
    assert complete(project, "he") == ["help"]
    assert "skeleton" in complete(project, "")


def test_paths_complete_relative_to_the_workspace(project: Path) -> None:
    assert complete(project, "view ") == ["view calc.py", "view pkg/"]  # .git is hidden
    assert complete(project, "view pkg/c") == ["view pkg/core.py"]
    assert complete(project, "note ca") == []  # note takes text, not paths


def test_symbols_complete_inside_a_source_file(project: Path) -> None:
    assert complete(project, "view calc.py/") == ["view calc.py/Calc/", "view calc.py/helper"]
    assert complete(project, "edit calc.py/Calc/m") == ["edit calc.py/Calc/mean"]
    assert complete(project, "view calc.py/Calc/") == ["view calc.py/Calc/add",
                                                       "view calc.py/Calc/mean"]


def test_prompt_toolkit_is_imported_only_at_the_first_prompt(tmp_path: Path) -> None:
    code = (
        "import sys, io\n"
        "from pathlib import Path\n"
        "from normalize.cli.console import Environment, prompt_reader\n"
        "class Tty(io.StringIO):\n"
        "    def isatty(self): return True\n"
        f"env = Environment(stdin=Tty(), stdout=Tty(), stderr=Tty(), env={{}})\n"
        f"read = prompt_reader(env, lambda: Path({str(tmp_path)!r}))\n"
        "print('prompt_toolkit' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
