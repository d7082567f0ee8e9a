"""Engine overhead: no-op steps, checkpoint cost as a task grows, and resuming a long task.

    python bench/engine.py                 # 10,000 steps, with and without fsync
    python bench/engine.py --steps 2000

A no-op step is a workflow step `note --turns 1 step N`: a read-only action
whose note lives for one turn, so the task's state stays the same size (a
plain `note` keeps its text until the workflow ends, which is not a no-op).
Each step still goes through the whole engine: the driver's decision, the
events and their journal lines, the tool registry, and a checkpoint of the
task file. The checkpoint figures time `TaskStore.save` itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normalize.runner import RunOptions, run_task, start_task
from normalize.store import TaskStore
from normalize.task import Limits, Task, TaskStatus
from normalize.workflow.spec import StepSpec, WorkflowSpec

STEPS = 10_000
# a checkpoint between two others is an appended record (older trees rewrite the file)
APPENDED: dict[str, Any] = {"full": False} if "full" in \
    TaskStore.save.__code__.co_varnames else {}


def noop_spec(steps: int) -> WorkflowSpec:
    """A workflow of `steps` no-op steps."""
    return WorkflowSpec(name="noop", path="<bench>", driver="workflow",
                        description=f"{steps} no-op steps",
                        steps=[StepSpec(name=f"s{i}", action=f"note --turns 1 step {i}")
                               for i in range(1, steps + 1)])


class TimedStore(TaskStore):
    """A TaskStore that records how long each `save` took, and the task at chosen saves."""

    def __init__(self, home: Path, *, fsync: bool, workspace: Path,
                 keep: tuple[int, ...] = ()) -> None:
        from normalize.redact import Redactor

        # as `normalize run` makes it: secrets are redacted from task files and journals
        super().__init__(home, fsync=fsync, redact=Redactor.for_workspace(workspace).redact_obj)
        self.saves: list[float] = []
        self.keep = keep
        self.kept: dict[int, tuple[Task, Any]] = {}

    def save(self, task: Task, *, lock: Any = None, **kw: Any) -> int:
        start = time.perf_counter()
        size = super().save(task, lock=lock, **kw)
        self.saves.append(time.perf_counter() - start)
        if len(self.saves) - 1 in self.keep:  # saves[i] follows step i
            copy = Task.from_dict(task.to_dict())
            copy.config = task.config  # the same config: encoded once per run
            self.kept[len(self.saves) - 1] = (copy, lock)
        return size


def interleaved_saves(store: TimedStore, first: int, second: int,
                      rounds: int = 201) -> tuple[float, float]:
    """Median seconds of checkpointing the task as it was after step `first` and after
    step `second`, saved in turn, so that the machine's load hits both alike."""
    (a, lock), (b, _) = store.kept[first], store.kept[second]
    lock.acquire(epoch=a.epoch + 1)
    try:
        times: dict[int, list[float]] = {first: [], second: []}
        for _ in range(rounds):
            for step, task in ((first, a), (second, b)):
                task.epoch = lock.epoch
                start = time.perf_counter()
                TaskStore.save(store, task, lock=lock, **APPENDED)
                times[step].append(time.perf_counter() - start)
    finally:
        lock.release()
    return statistics.median(times[first]), statistics.median(times[second])


@dataclass
class StepFigures:
    steps: int
    fsync: bool
    seconds: float
    per_step_ms: float
    save_early_ms: float  # median checkpoint of the task as it was after step 100
    save_late_ms: float  # … and after the last step, saved in turn with it
    task_bytes: int
    status: str


@contextmanager
def _dirs() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="nbench-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        yield home, work


def run_steps(steps: int = STEPS, *, fsync: bool = False, home: Path | None = None,
              work: Path | None = None, stop_after: int | None = None,
              ) -> tuple[StepFigures, str]:
    """Run a `steps`-step no-op workflow (interrupted after `stop_after` steps, as by
    Ctrl-C); its figures and the task id."""
    if home is None or work is None:
        with _dirs() as (h, w):
            return run_steps(steps, fsync=fsync, home=h, work=w, stop_after=stop_after)
    early_step, late_step = min(100, steps), steps
    keep = (early_step, late_step) if stop_after is None else ()
    store = TimedStore(home, fsync=fsync, workspace=work, keep=keep)
    options = RunOptions(workspace=work, store=store, fsync=fsync)
    if stop_after is not None:
        finished = [0]

        def stop(event: Any) -> None:
            if event.type == "action_finished":
                finished[0] += 1
                if finished[0] == stop_after:
                    options.cancel.cancel("stopped by the benchmark")

        options.subscribers = [stop]
    task = start_task(noop_spec(steps), "bench", options, limits=Limits())
    start = time.perf_counter()
    outcome = run_task(task, options)
    seconds = time.perf_counter() - start
    size = store.task_path(task.id).stat().st_size
    early, late = interleaved_saves(store, early_step, late_step) \
        if keep and late_step in store.kept else (float("nan"), float("nan"))
    if keep:  # the copies are not needed any more
        store.kept.clear()
    figures = StepFigures(steps, fsync, seconds, seconds / steps * 1000, early * 1000,
                          late * 1000, size, outcome.status.value)
    return figures, task.id


def normalize_argv() -> list[str]:
    script = Path(sys.executable).parent / "normalize"
    return [str(script)] if script.exists() else [sys.executable, "-m", "normalize.cli.app"]


def time_resume(steps: int = STEPS, runs: int = 5) -> dict[str, Any]:
    """`normalize resume` of a task with `steps` finished steps: start to its first action.

    The task is a `steps + 1`-step workflow interrupted after `steps` steps;
    `normalize resume ID --json` runs as a fresh process and the clock stops
    when its first `action_started` line arrives. `normalize/` is compiled
    first (this machine sets PYTHONDONTWRITEBYTECODE).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from startup import compile_tree

    compile_tree()
    with _dirs() as (home, work):
        figures, task_id = run_steps(steps + 1, home=home, work=work, stop_after=steps)
        assert figures.status == TaskStatus.INTERRUPTED.value, figures.status
        env = {**os.environ, "NORMALIZE_HOME": str(home)}
        times = []
        for _ in range(runs):
            # the same state every time: resume a copy of the stopped task
            snapshot = {p: p.read_bytes() for p in (home / "tasks").glob(f"{task_id}.*")}
            start = time.perf_counter()
            proc = subprocess.Popen([*normalize_argv(), "resume", task_id, "--json"],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, cwd=work, text=True)
            assert proc.stdout is not None
            first = None
            for line in proc.stdout:  # read to the end: the run finishes normally
                if first is None and json.loads(line).get("type") == "action_started":
                    first = time.perf_counter() - start
            proc.stdout.close()
            if proc.wait(timeout=60) != 0:
                raise RuntimeError(f"normalize resume {task_id} failed")
            if first is None:
                raise RuntimeError("the resumed task ran no action")
            times.append(first)
            for path, data in snapshot.items():
                path.write_bytes(data)
        task_bytes = (home / "tasks" / f"{task_id}.json").stat().st_size
        journal_bytes = (home / "tasks" / f"{task_id}.jsonl").stat().st_size
    return {"steps": steps, "seconds": statistics.median(times), "task_bytes": task_bytes,
            "journal_bytes": journal_bytes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    for fsync in (False, True):
        figures, _ = run_steps(args.steps, fsync=fsync)
        print(f"fsync={fsync!s:<5} {figures.per_step_ms:.3f} ms/step  checkpoint "
              f"{figures.save_early_ms:.3f} ms @100, {figures.save_late_ms:.3f} ms "
              f"@{args.steps}  ({figures.task_bytes:,} bytes, {figures.status})")
    resume = time_resume(args.steps)
    print(f"resume of {args.steps:,} steps: {resume['seconds'] * 1000:.0f} ms to the first action")
    return 0


if __name__ == "__main__":
    sys.exit(main())
