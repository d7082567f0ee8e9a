"""The end of a run as a person reads it: counts in words, statuses in words, what to do next."""

from __future__ import annotations

import io

from msgspec.structs import replace
from rich.console import Console

from normalize.cli.render import LiveRenderer, PlainRenderer
from normalize.events import (
    ActionFinished,
    BaseEvent,
    CheckpointTaken,
    Emitter,
    InputReceived,
    RunEnded,
    RunStarted,
)


def edit_run(status: str = "done") -> list[BaseEvent]:
    return [
        RunStarted(task_id="abc12345", driver="llm", goal="fix calc"),
        ActionFinished(key="0.0", tool="edit", command="edit calc.py", status="success",
                       duration=0.01),
        CheckpointTaken(step=1, key="0.0", kind="action", files=1, added=1, removed=1,
                        changes={"calc.py": [1, 1]}),
        RunEnded(status=status, summary="fixed calc", turns=1, actions=1, duration=1.5),
    ]


def live(events: list[BaseEvent]) -> list[str]:
    console = Console(file=io.StringIO(), width=100, height=40, force_terminal=False,
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


def plain(events: list[BaseEvent]) -> list[str]:
    out = io.StringIO()
    emitter = Emitter("abc12345")
    emitter.subscribe(PlainRenderer(out))
    for event in events:
        emitter.emit(event)
    return out.getvalue().splitlines()


def test_the_end_panel_after_edits_names_diff_and_undo() -> None:
    assert live(edit_run())[-7:] == [
        "╭─ ✓ done · task abc12345 ─────────────────────────────────────────────────────╮",
        "│ fixed calc                                                                   │",
        "│ 1 turn · 1 action · 1.5s                                                     │",
        "│ files changed:                                                               │",
        "│   +1 -1  calc.py                                                             │",
        "│ see them: normalize diff abc12345 · take them back: normalize undo abc12345  │",
        "╰──────────────────────────────────────────────────────────────────────────────╯",
    ]


def test_the_plain_log_after_edits_names_diff_and_undo() -> None:
    assert plain(edit_run())[-3:] == [
        "task abc12345 done · 1 turn · 1 action · 1.5s",
        "  fixed calc",
        "  see them: normalize diff abc12345 · take them back: normalize undo abc12345",
    ]


def test_a_run_without_changes_suggests_no_diff() -> None:
    events = [e for e in edit_run() if not isinstance(e, CheckpointTaken)]
    assert not any("normalize diff" in line for line in live(events) + plain(events))


def test_a_limit_is_said_in_words() -> None:
    shown = live(edit_run("limit_reached")) + plain(edit_run("limit_reached"))
    assert not any("limit_reached" in line for line in shown)
    assert any("■ limit reached · task abc12345" in line for line in shown)
    assert "task abc12345 limit reached · 1 turn · 1 action · 1.5s" in shown


def resumed_run() -> list[BaseEvent]:
    return [RunStarted(task_id="abc12345", driver="llm", goal="fix calc", resumed=True, turn=4),
            RunEnded(status="done", summary="fixed calc", turns=5, actions=7, duration=1.5)]


def test_after_a_resume_the_figures_say_which_are_the_tasks_and_which_this_runs() -> None:
    assert plain(resumed_run())[-2] == \
        "task abc12345 done · 5 turns · 7 actions in all · 1.5s this run"
    assert "│ 5 turns · 7 actions in all · 1.5s this run".ljust(79) + "│" in live(resumed_run())


DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-a = 1\n+a = 10\n"


def test_the_plain_log_shows_an_edits_diff() -> None:
    events = [RunStarted(task_id="abc12345", driver="llm", goal="fix calc"),
              ActionFinished(key="0.0", tool="edit", command="edit calc.py", status="success",
                             duration=0.01, preview=f"edited calc.py (+1 -1)\n{DIFF}")]
    assert plain(events)[1:] == [
        "  ✓ edit calc.py  (0.01s)",
        "    --- a/calc.py",
        "    +++ b/calc.py",
        "    @@ -1 +1 @@",
        "    -a = 1",
        "    +a = 10",
    ]


def test_the_footer_stops_counting_a_typed_line_once_the_model_has_it() -> None:
    console = Console(file=io.StringIO(), width=100, height=40, force_terminal=True,
                      color_system=None, legacy_windows=False, get_time=lambda: 0.0,
                      _environ={})
    renderer = LiveRenderer(console, auto_refresh=False, clock=lambda: 0.0)
    emitter = Emitter("abc12345")
    emitter.subscribe(renderer)
    emitter.emit(RunStarted(task_id="abc12345", driver="llm", goal="fix calc"))
    renderer.typing("", 1)  # Enter queued one line
    assert "1 line for the next turn" in renderer._footer(0.0).plain
    emitter.emit(InputReceived(kind="typed", answer="also check the tests"))
    assert "for the next turn" not in renderer._footer(0.0).plain
    renderer.close()
    assert "↳ sent to the model: also check the tests" in console.file.getvalue()  # type: ignore[attr-defined]


def test_the_panel_keeps_its_width_whatever_the_ending_says() -> None:
    def width(status: str, error: str | None = None) -> set[int]:
        events = edit_run(status)
        ended = events[-1]
        assert isinstance(ended, RunEnded)
        events[-1] = replace(ended, error=error)
        return {len(line) for line in live(events) if line[:1] in "╭│╰"}

    assert width("done") == width("failed", "step 'x' failed: exit status 1") == \
        width("limit_reached") == {80}
