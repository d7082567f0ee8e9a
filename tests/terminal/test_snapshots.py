"""What a person sees, as text: the live view at 60 and 120 columns, and the plain log.

Rich renders into a StringIO at a fixed width (no colour, time frozen); a
change to what is on screen shows here as a diff to review.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from normalize.cli.render import LiveRenderer, PlainRenderer
from normalize.events import ActionFinished, BaseEvent, Emitter, RunEnded, RunStarted, StepStarted

FAILURE = "1 failed, 1 passed: tests/test_calc.py::test_add - assert -1 == 3"


def check_run() -> list[BaseEvent]:
    return [
        RunStarted(task_id="abc12345", driver="state_machine",
                   goal="Run the tests; on failure analyze the workspace and report"),
        StepStarted(state="testing"),
        ActionFinished(key="0.0", tool="test", command="test", status="error", duration=1.89,
                       error=FAILURE, preview=f"pytest: 1 failed, 1 passed\nFAILED {FAILURE}"),
        StepStarted(state="analyzing"),
        ActionFinished(key="1.0", tool="analyze", command="analyze --health", status="success",
                       duration=0.01, preview="3 files, 11 lines in .\nlanguages:"),
        RunEnded(status="failed", exit_code=1, turns=3, actions=2, duration=2.1,
                 summary="tests fail; the first failure is shown above"),
    ]


def live(width: int, events: list[BaseEvent], height: int = 40) -> list[str]:
    console = Console(file=io.StringIO(), width=width, height=height, force_terminal=False,
                      color_system=None, legacy_windows=False, get_time=lambda: 0.0,
                      _environ={})
    renderer = LiveRenderer(console, auto_refresh=False, clock=lambda: 0.0)
    emitter = Emitter("abc12345")
    emitter.subscribe(renderer)
    for event in events:
        emitter.emit(event)
    renderer.close()
    file = console.file
    assert isinstance(file, io.StringIO)
    return [line.rstrip() for line in file.getvalue().splitlines()]


PANEL = [  # the end panel: 80 columns, whatever its ending says
    "╭─ ■ failed · task abc12345 ───────────────────────────────────────────────────╮",
    "│ tests fail; the first failure is shown above                                 │",
    "│ 3 turns · 2 actions · 2.1s                                                   │",
    "╰──────────────────────────────────────────────────────────────────────────────╯",
]
NARROW_PANEL = [  # as wide as a narrower terminal
    "╭─ ■ failed · task abc12345 ───────────────────────────────╮",
    "│ tests fail; the first failure is shown above             │",
    "│ 3 turns · 2 actions · 2.1s                               │",
    "╰──────────────────────────────────────────────────────────╯",
]


def test_the_live_view_on_a_narrow_terminal_keeps_the_failure_indented() -> None:
    assert live(60, check_run()) == [
        "task abc12345 started: Run the tests; on failure analyze the",
        "workspace and report (state_machine)",
        "→ state testing",
        "✗ test  1.89s",
        "    1 failed, 1 passed: tests/test_calc.py::test_add -",
        "    assert -1 == 3",
        "→ state analyzing",
        "✓ analyze --health  0.01s  3 files, 11 lines in .",
        *NARROW_PANEL,
    ]


def test_the_live_view_at_120_columns() -> None:
    assert live(120, check_run()) == [
        "task abc12345 started: Run the tests; on failure analyze the workspace and report "
        "(state_machine)",
        "→ state testing",
        "✗ test  1.89s",
        f"    {FAILURE}",
        "→ state analyzing",
        "✓ analyze --health  0.01s  3 files, 11 lines in .",
        *PANEL,
    ]


def test_the_plain_log_no_color_dumb_terminals_and_pipes() -> None:
    out = io.StringIO()
    emitter = Emitter("abc12345")
    emitter.subscribe(PlainRenderer(out))
    for event in check_run():
        emitter.emit(event)
    assert out.getvalue().splitlines() == [
        "task abc12345 started: Run the tests; on failure analyze the workspace and report "
        "(state_machine)",
        "→ state testing",
        "  ✗ test  (1.89s)",
        f"      {FAILURE}",
        "→ state analyzing",
        "  ✓ analyze --health  (0.01s)  3 files, 11 lines in .",  # the gist, as the live view
        "task abc12345 failed · 3 turns · 2 actions · 2.1s",
        "  tests fail; the first failure is shown above",
    ]


VIEW = "\n".join(f"{n:>4}│ x_{n} = 1" for n in range(1, 41))


def user_run() -> list[BaseEvent]:
    return [
        RunStarted(task_id="abc12345", driver="user", goal="look"),
        ActionFinished(key="0.0", tool="view", command="view forty.py", status="success",
                       duration=0.0, preview=VIEW),
    ]


@pytest.mark.parametrize("width", [60, 120])
def test_the_user_prompt_shows_a_result_whole_at_any_width(width: int) -> None:
    shown = live(width, user_run(), height=60)
    assert shown[1] == "✓ view forty.py  0.00s"
    assert shown[2:] == VIEW.splitlines()


def test_the_user_prompt_cuts_at_the_terminals_height_with_the_id_to_fetch() -> None:
    events = user_run()
    events[1] = ActionFinished(key="0.0", tool="view", command="view forty.py",
                               status="success", duration=0.0, preview=VIEW, cache_id="r1")
    shown = live(60, events, height=12)
    assert shown[2:] == [*VIEW.splitlines()[:7], "… 33 more lines — `fetch r1` shows all"]
