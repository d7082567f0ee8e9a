"""A `for_each` over a variable: checkpoints carry the position, not the list; resume is exact.

The variables a run starts with live in its config, written once per run; a
checkpoint carries only the variables a step changed (a large one kept beside
it, once) and each loop's position. Killed inside either record, a resumed
task goes on from the exact item, running every side effect once.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from durability_support import append_action, cli, log_lines, only_task, task_file

from normalize.events import BaseEvent, TaskSaved
from normalize.runner import RunOptions, run_task, start_task
from normalize.store import TaskStore
from normalize.workflow.spec import StepSpec, WorkflowSpec

KILLED = -signal.SIGKILL


def loop_record_sizes(home: Path, workspace: Path, count: int) -> list[int]:
    """Bytes of each checkpoint record of a `note` loop over a `count`-item workflow variable."""
    spec = WorkflowSpec(name="loop", path="<test>", driver="workflow",
                        vars={"items": [f"item-{i:05d}" for i in range(count)]},
                        steps=[StepSpec(name="each", for_each="items", as_="x",
                                        action="note --turns 1 at {x}")])
    events: list[BaseEvent] = []
    options = RunOptions(workspace=workspace, store=TaskStore(home, fsync=False), fsync=False,
                         subscribers=[events.append])
    outcome = run_task(start_task(spec, "loop", options), options)
    assert outcome.status.value == "done", outcome.error
    return [e.bytes for e in events if isinstance(e, TaskSaved)]


def test_a_loops_checkpoint_records_do_not_grow_with_the_variables_length(
        tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    short = loop_record_sizes(tmp_path / "a", tmp_path / "ws", 100)
    long = loop_record_sizes(tmp_path / "b", tmp_path / "ws", 2_000)
    # the records while the loop runs (not the run's first and last whole-file writes)
    assert max(long[2:-1]) - max(short[2:-1]) < 64, (max(short[2:-1]), max(long[2:-1]))
    assert abs(long[100] - short[100]) < 16  # item 50: the same record but for its times
    assert max(long[2:-1]) < 8_000  # 2,000 items of 10 bytes would be 26,000 on their own


ITEMS = [f"v{i}" for i in range(8)]
FOUND = [f"f{i}-" + "x" * 600 for i in range(10)]  # 6,000 characters: kept beside


def var_loop_workflow(path: Path) -> Path:
    """A step that sets a large variable, a loop over a workflow variable, a loop over it.

    The large variable is made from another (a `format` transform), not from
    the step's output: a result recovered from the journal is its preview.
    """
    append = append_action("{x}")
    pool = [line + "\n" for line in FOUND]  # multi-line items: `{pool}` is one a line
    path.write_text(f"""[workflow]
name = "varloop"
[workflow.vars]
items = {json.dumps(ITEMS)}
pool = {json.dumps(pool)}
[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "gather"
action = "note --turns 1 gathered"
capture = "found"
transform = "format:{{pool}}"

[[workflow.steps]]
name = "each_item"
for_each = "items"
as = "x"
action = '''{append}'''

[[workflow.steps]]
name = "each_found"
for_each = "found"
as = "x"
action = '''{append}'''
""")
    return path


@pytest.mark.parametrize("point", [
    "kept_write@1",  # the changed variable (`found`), kept beside the checkpoints
    "kept_write@2",  # the first loop's items
    "kept_write@3",  # the second loop's items (its variable split into lines)
    "checkpoint_append@9",  # a position record inside the first loop
    "checkpoint_append@26",  # a position record inside the second loop
])
def test_a_crash_inside_a_loops_records_resumes_at_the_exact_item(
        tmp_path: Path, normalize_home: Path, point: str) -> None:
    flow = var_loop_workflow(tmp_path / "flow.toml")
    crashed = cli("run", str(flow), "--quiet", cwd=tmp_path, home=normalize_home, crash=point)
    assert crashed.returncode == KILLED, crashed.stderr
    before = log_lines(tmp_path)
    assert before == (ITEMS + FOUND)[:len(before)]
    task_id = only_task(normalize_home)
    resumed = cli("resume", task_id, "--quiet", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert log_lines(tmp_path) == ITEMS + FOUND  # every item once, in order
    state = task_file(normalize_home, task_id)
    assert state["status"] == "done"
    stored = state["driver_states"]["workflow"]["vars"]
    assert list(stored) == ["found"]  # the list it started with is in the config, not here
    assert list(stored["found"]) == ["$kept"]
    assert not list((normalize_home / "tasks" / task_id).glob(".*.tmp"))  # swept


def test_a_task_stored_with_all_its_variables_resumes_with_them(tmp_path: Path) -> None:
    from normalize.drivers.workflow import WorkflowDriver

    spec = WorkflowSpec(name="w", path="w.toml", driver="workflow", vars={"a": [1, 2], "b": "x"})
    old = {"vars": {"a": [1, 2], "b": "y", "c": 3}, "frames": []}  # before: every variable
    driver = WorkflowDriver(spec)
    driver.restore(old)
    assert driver.vars == {"a": [1, 2], "b": "y", "c": 3}
    assert driver.snapshot()["vars"] == {"b": "y", "c": 3}  # saved again: the changes only
