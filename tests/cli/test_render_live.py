"""The Rich live view, rendered into strings: Live(auto_refresh=False) driven by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cli_helpers import Clock, emit_all, lines, output, render, strip_ansi

from normalize.events import (
    ActionFinished,
    ActionStarted,
    DecisionMade,
    ModelReplied,
    RunEnded,
    RunStarted,
    StepStarted,
    TextDelta,
    ThinkingDelta,
    WaitingForInput,
)

Factory = Callable[..., Any]

DIFF = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        "-    return a - b\n+    return a + b")


def start(emitter: Any) -> None:
    emit_all(emitter,
             RunStarted(goal="fix the failing test", driver="llm", max_turns=20),
             StepStarted(name="tests", index=2, total=3))


def test_streaming_text_shows_in_the_live_region_then_gives_way_to_the_reply(
        live_factory: Factory, clock: Clock) -> None:
    renderer, console, emitter = live_factory()
    start(emitter)
    for word in "The test fails because add subtracts.\nLet me look at it.".split(" "):
        emitter.emit(TextDelta(text=word + " "))
    emitter.emit(ThinkingDelta(text="checking calc.py first"))
    clock.now += 2.5
    renderer.refresh()
    assert lines(render(renderer.view())) == [
        "checking calc.py first",
        "The test fails because add subtracts.",
        "Let me look at it.",
        "step 2/3: tests · turn 1/20 · 2.5s",
    ]
    emit_all(emitter,
             ModelReplied(turn=0, input_tokens=1200, output_tokens=80, cost_usd=0.0048),
             DecisionMade(turn=0, thinking="The test fails because add subtracts."))
    renderer.refresh()
    assert lines(render(renderer.view())) == [
        "step 2/3: tests · turn 1/20 · 1,200 in / 80 out · $0.0048 · 2.5s",
    ]
    assert lines(output(console)) == [
        "task abc12345 started: fix the failing test (llm)",
        "→ step 2/3: tests",
        "The test fails because add subtracts.",
    ]


def test_a_running_action_spins_then_turns_into_a_tick_with_its_diff(
        live_factory: Factory, clock: Clock) -> None:
    renderer, console, emitter = live_factory()
    start(emitter)
    emitter.emit(ActionStarted(turn=0, key="0.0", tool="edit", command="edit calc.py <<EOF\n…",
                               read_only=False))
    clock.now += 0.4
    assert lines(render(renderer.view())) == [
        "⠋ edit calc.py  0.4s",
        "step 2/3: tests · turn 1/20 · 0.4s",
    ]
    emitter.emit(ActionFinished(turn=0, key="0.0", tool="edit", command="edit calc.py <<EOF\n…",
                                status="success", duration=0.031, preview=DIFF,
                                data={"path": "calc.py", "added": 1, "removed": 1}))
    renderer.close()
    assert lines(output(console))[2:] == [
        "✓ edit calc.py  0.03s  +1 -1",
        "    --- a/calc.py",
        "    +++ b/calc.py",
        "    @@ -1,2 +1,2 @@",
        "     def add(a, b):",
        "    -    return a - b",
        "    +    return a + b",
    ]
    assert "edit calc.py" not in render(renderer.view())  # no longer running


def test_a_failing_and_a_blocked_action(live_factory: Factory) -> None:
    renderer, console, emitter = live_factory()
    start(emitter)
    emit_all(emitter,
             ActionStarted(turn=0, key="0.0", tool="run", command="run pytest -q"),
             ActionFinished(turn=0, key="0.0", tool="run", command="run pytest -q",
                            status="error", duration=1.25, exit_code=1,
                            error="exit code 1: 1 failed, 3 passed"),
             ActionStarted(turn=0, key="0.1", tool="run", command="run rm -rf build"),
             ActionFinished(turn=0, key="0.1", tool="run", command="run rm -rf build",
                            status="blocked", duration=0.0,
                            error="denied: `rm` needs approval (--approve ask)"))
    renderer.refresh()
    assert lines(output(console))[2:] == [
        "✗ run pytest -q  1.25s",
        "    exit code 1: 1 failed, 3 passed",
        "⊘ run rm -rf build  0.00s",
        "    denied: `rm` needs approval (--approve ask)",
    ]


def test_a_waiting_question_and_the_final_summary_panel(live_factory: Factory) -> None:
    _renderer, console, emitter = live_factory()
    start(emitter)
    emit_all(emitter,
             ActionFinished(turn=0, key="0.0", tool="ask", command="ask Which Python version?",
                            status="success", duration=0.0),
             WaitingForInput(kind="question", question="Which Python version?",
                             command="ask Which Python version?"),
             RunEnded(status="waiting", exit_code=4, summary="Which Python version?", turns=1,
                      actions=1, duration=3.21, input_tokens=1200, output_tokens=80,
                      cost_usd=0.0048))
    assert lines(output(console))[2:] == [  # the question once: no ask line, not in the panel
        "? Which Python version?",
        "╭─ ■ waiting · task abc12345 ──────────────────────────────────────────────────╮",
        "│ 1 turn · 1 action · 3.2s · 1,200 in / 80 out tokens · $0.0048                │",
        "╰──────────────────────────────────────────────────────────────────────────────╯",
    ]


def test_a_done_run_ends_in_a_green_panel_on_a_terminal(live_factory: Factory) -> None:
    renderer, console, emitter = live_factory(terminal=True)
    start(emitter)
    emitter.emit(ActionStarted(turn=0, key="0.0", tool="test", command="test"))
    renderer.refresh()
    drawn = strip_ansi(output(console))
    assert "⠋ test  0.0s" in drawn  # the live region was drawn on the terminal
    emit_all(emitter,
             ActionFinished(turn=0, key="0.0", tool="test", command="test", status="success",
                            duration=0.5, preview="4 passed"),
             RunEnded(status="done", summary="fixed add; the tests pass", turns=2, actions=1,
                      duration=4.0))
    raw = output(console)
    assert "\x1b[1;32m✓\x1b[0m test" in raw  # a green tick
    tail = strip_ansi(raw)[len(drawn):]
    assert lines(tail)[-5:] == [
        "✓ test  0.50s  4 passed",
        "╭─ ✓ done · task abc12345 ─────────────────────────────────────────────────────╮",
        "│ fixed add; the tests pass                                                    │",
        "│ 2 turns · 1 action · 4.0s                                                    │",
        "╰──────────────────────────────────────────────────────────────────────────────╯",
    ]
    assert raw.endswith("\n") and "\x1b[?25h" in raw  # cursor shown again


def test_deltas_never_draw_until_the_next_refresh(live_factory: Factory) -> None:
    renderer, console, emitter = live_factory(terminal=True)
    start(emitter)
    renderer.refresh()
    before = output(console)
    for _ in range(20_000):
        emitter.emit(TextDelta(text="token "))
    assert output(console) == before  # 20,000 deltas, not one write
    renderer.refresh()
    drawn = strip_ansi(output(console)[len(before):])
    assert drawn.count("token") <= 6 * 80 // 6  # one redraw of the tail, not the stream
    assert len(renderer.state.text) <= 65  # the buffer is compacted as it grows


def test_a_hold_takes_the_live_region_down_for_a_prompt(live_factory: Factory) -> None:
    renderer, console, emitter = live_factory(terminal=True)
    start(emitter)
    emitter.emit(ActionStarted(turn=0, key="0.0", tool="test", command="test"))
    renderer.refresh()
    with renderer.hold():
        mark = len(output(console))
        assert not renderer.live.is_started
        renderer.refresh()
        assert output(console)[mark:] == ""  # nothing drawn while a person types
    emitter.emit(ActionFinished(turn=0, key="0.0", tool="test", command="test",
                                status="success", duration=0.1))
    assert renderer.live.is_started  # back after the prompt
    renderer.close()
