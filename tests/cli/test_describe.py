"""One wording per message: the plain log, the live view and `tasks show` say the same things."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_helpers import NORMALIZE, cli_env, lines, output, workspace

from normalize.cli.describe import history, journal_events, recent_actions
from normalize.cli.render import PlainRenderer
from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    BaseEvent,
    ContextCompacted,
    Emitter,
    FallbackUsed,
    LoopDetected,
    ModelRetried,
    Notice,
    RunStarted,
    StepStarted,
)

Factory = Callable[..., Any]

ONE_LINERS: list[BaseEvent] = [
    Notice(level="warning", message="the workspace is dirty"),
    Notice(level="info", message="step 'tests' skipped"),
    Notice(level="error", message="shown by the run's ending instead"),
    FallbackUsed(from_model="big", to_model="small", reason="overloaded"),
    ModelRetried(attempt=2, delay=1.5, reason="rate limited"),
    LoopDetected(command="run pytest", repeats=3),
    ActionInterrupted(key="0.1", tool="edit", command="edit calc.py <<EOF\nbody\nEOF",
                      rerun=True),
]


def plain_lines(*events: BaseEvent) -> list[str]:
    out = io.StringIO()
    emitter = Emitter("abc12345")
    emitter.subscribe(PlainRenderer(out))
    for event in events:
        emitter.emit(event)
    return out.getvalue().splitlines()


def test_the_plain_log_and_the_live_view_word_the_one_liners_alike(
        live_factory: Factory) -> None:
    renderer, console, emitter = live_factory()
    for event in ONE_LINERS:
        emitter.emit(event)
    renderer.close()
    expected = [
        "! the workspace is dirty",
        "· step 'tests' skipped",
        "! falling back from big to small: overloaded",
        "! model call failed (rate limited); retry 2 in 1.5s",
        "! loop detected: run pytest repeated 3×",
        "? edit calc.py: interrupted, runs again",
    ]
    assert lines(output(console)) == expected
    assert plain_lines(*ONE_LINERS) == [f"  {line}" for line in expected]


def test_the_run_heading_is_the_same_in_both_views(live_factory: Factory) -> None:
    started = RunStarted(goal="fix the failing test\nand more", driver="llm", resumed=True)
    renderer, console, emitter = live_factory()
    emitter.emit(started)
    renderer.close()
    heading = "task abc12345 resumed: fix the failing test (llm)"
    assert lines(output(console)) == [heading]
    assert plain_lines(started) == [heading]


def test_a_compacted_context_is_a_live_footnote_only(live_factory: Factory) -> None:
    compacted = ContextCompacted(before_chars=12_000, after_chars=3_000, results_compacted=4)
    renderer, console, emitter = live_factory()
    emitter.emit(compacted)
    renderer.close()
    assert lines(output(console)) == ["· context compacted: 12,000 → 3,000 characters (4 results)"]
    assert plain_lines(compacted) == []


def journal(*events: BaseEvent) -> list[dict[str, Any]]:
    """What a journal holds on disk for `events`: their JSON lines, read back as dicts."""
    emitter = Emitter("abc12345")
    return [json.loads(emitter.emit(event).to_json()) for event in events]


def test_a_journal_reads_back_as_typed_events_and_skips_kinds_it_does_not_know() -> None:
    raw = journal(StepStarted(name="look", index=1, total=2),
                  ActionFinished(key="0.0", tool="view", command="view calc.py",
                                 status="success", duration=0.01))
    newer = {**raw[1], "type": "made_by_a_newer_version", "seq": 99}
    events = list(journal_events([raw[0], newer, {"no": "type"}, raw[1]]))
    assert [type(e) for e in events] == [StepStarted, ActionFinished]
    assert events[1] == ActionFinished(task_id="abc12345", seq=2, ts=events[1].ts, key="0.0",
                                       tool="view", command="view calc.py", status="success",
                                       duration=0.01)


def test_task_history_names_steps_and_actions_as_the_run_did() -> None:
    raw = journal(RunStarted(goal="g", driver="workflow"),
                  StepStarted(name="look", index=1, total=2),
                  ActionFinished(key="0.0", tool="edit", command="edit calc.py <<EOF\nx\nEOF",
                                 status="success", duration=0.012),
                  StepStarted(name="fixing", state="fixing"),
                  RunStarted(goal="g", driver="workflow", resumed=True),
                  ActionFinished(key="1.0", tool="run", command="run pytest", status="error",
                                 duration=1.5, error="exit code 1"))
    assert history(journal_events(raw)) == [
        "  → step 1/2: look",
        "  ✓ edit calc.py  (0.01s)",  # the heredoc marker goes, as in the run's own log
        "  → state fixing",
        "  ↻ resumed",
        "  ✗ run pytest  (1.50s)",
    ]
    assert history(journal_events(raw[:2])) == ["  → step 1/2: look", "  (no actions yet)"]


def test_the_recent_actions_for_a_hand_over_are_the_last_few() -> None:
    raw = journal(*(ActionFinished(key=f"{i}.0", tool="view", command=f"view f{i}.py",
                                   status="success") for i in range(7)),
                  ActionFinished(key="7.0", tool="write", command="write out.txt <<END",
                                 status="blocked"))
    assert recent_actions(journal_events(raw), 3) == [
        "  ✓ view f5.py", "  ✓ view f6.py", "  ⊘ write out.txt",
    ]


def test_tasks_show_lists_the_steps_with_the_run_log_labels(tmp_path: Path) -> None:
    project = workspace(tmp_path / "project")
    env = cli_env()
    ran = subprocess.run([*NORMALIZE, "run", "demo.toml", "--quiet"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    shown = subprocess.run([*NORMALIZE, "tasks", "show", "last"], cwd=project, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    steps = [line for line in shown.stdout.split("steps:\n", 1)[1].splitlines()
             if line.startswith(("  →", "  ✓"))]  # each step's output is under it
    assert [line.split("  (")[0] for line in steps] == [
        "  → step 1/2: look", "  ✓ view calc.py", "  → step 2/2: remember",
        "  ✓ note calc.py is small",
    ]
