"""What durability costs: side-effecting steps with and without fsync, the epoch fence, recovery.

    python bench/durability.py               # 300 side-effecting steps
    python bench/durability.py --steps 1000

The steps' tool is a stand-in `write` that does nothing but is declared
side-effecting, so the figures are the engine's own cost, not the disk's
cost of writing the file. A side-effecting step costs more than a read-only
one: the decision is
checkpointed before it runs (task.inflight), `action_started` and
`action_finished` are fsynced to the journal, and the task is checkpointed
again after (each checkpoint one record appended to the task's checkpoint
log). The fence (`TaskLock.verify`, an `os.stat` of the owner file) runs
once per durable write: before each fsynced journal line and each checkpoint.
Resuming reads the task file (and the records appended after it) and only
the journal's tail (and, for an in-flight decision, the journal from the
last checkpoint's offset), so it does not grow with the task's history; it
grows with the workflow's spec, decoded once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from normalize.runner import RunOptions, open_task, run_task, start_task
from normalize.store import TaskStore
from normalize.task import Action, ActionResult, Task, TaskStatus
from normalize.tools import default_tools
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.workflow.spec import StepSpec, WorkflowSpec


class NoopWrite:
    """Declared side-effecting, does nothing: isolates the engine's durability cost."""

    name: ClassVar[str] = "write"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "no-op stand-in for write"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        del action, ctx
        return ActionResult.success("ok")


def tools() -> ToolRegistry:
    registry = default_tools()
    registry.register(NoopWrite())
    return registry


def write_spec(steps: int) -> WorkflowSpec:
    """`steps` steps that each overwrite one small file (a side effect)."""
    return WorkflowSpec(name="writes", path="<bench>", driver="workflow",
                        permissions={"mode": "yes"},
                        steps=[StepSpec(name=f"w{i}", action=f"write out.txt <<EOF\n{i}\nEOF")
                               for i in range(steps)])


def per_step(steps: int, *, fsync: bool) -> float:
    """Milliseconds per side-effecting step through the whole engine."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["NORMALIZE_HOME"] = str(root / "home")
        options = RunOptions(workspace=root, fsync=fsync, approve="yes", tools=tools(),
                             store=TaskStore(root / "home", fsync=fsync))
        task = start_task(write_spec(steps), "bench", options)
        started = time.perf_counter()
        outcome = run_task(task, options)
        took = time.perf_counter() - started
        assert outcome.status is TaskStatus.DONE, outcome.error
        return took / steps * 1000


def fence_cost(calls: int = 20_000) -> float:
    """Microseconds per `TaskLock.verify` (the check before each durable write)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = TaskStore(Path(tmp), fsync=False)
        task = Task.new("g", tmp, "workflow")
        store.save(task)
        lock = store.lock(task.id)
        lock.acquire(epoch=1)
        started = time.perf_counter()
        for _ in range(calls):
            lock.verify()
        took = time.perf_counter() - started
        lock.release()
        return took / calls * 1e6


def recovery(steps: int) -> float:
    """Milliseconds to resume a task stopped after `steps` steps and run its last one."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = TaskStore(root / "home", fsync=False)
        options = RunOptions(workspace=root, fsync=False, approve="yes", store=store,
                             tools=tools())
        task = start_task(write_spec(steps + 1), "bench", options)
        task.limits.max_turns = steps
        run_task(task, options)  # stops at the limit, one step before the end
        loaded = open_task(task.id, options)
        times = []
        for _ in range(5):
            copy = Task.from_dict(loaded.to_dict())
            copy.limits.max_turns = None
            started = time.perf_counter()
            outcome = run_task(copy, options, resumed=True)
            times.append(time.perf_counter() - started)
            assert outcome.status is TaskStatus.DONE
            store.save(loaded)  # back to the stopped state for the next round
        return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    synced = per_step(args.steps, fsync=True)
    unsynced = per_step(args.steps, fsync=False)
    print(f"side-effecting step, fsync on:  {synced:7.2f} ms  ({args.steps} steps)")
    print(f"side-effecting step, fsync off: {unsynced:7.2f} ms")
    print(f"epoch fence per durable write:  {fence_cost():7.2f} µs")
    for steps in (10, args.steps):
        print(f"resume after {steps:>5} steps, run 1:  {recovery(steps):7.2f} ms")


if __name__ == "__main__":
    main()
