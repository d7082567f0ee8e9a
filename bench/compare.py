"""No-op durable steps side by side: normalize, and LangGraph when it is installed.

    python bench/compare.py                      # 10,000 steps, 5 interleaved rounds
    python bench/compare.py --steps 2000 --rounds 3
    python bench/compare.py --base /tmp/old-tree # also an older normalize tree, for ratios

Each figure is one fresh process running N no-op durable steps; the
processes of all the contenders run in turn, round after round, so the
machine's load hits them alike, and each figure is the median of its rounds.

- normalize: a workflow of `note --turns 1` steps (read-only: one durable
  checkpoint per step), through the whole engine, with the redactor
  `normalize run` uses.
- LangGraph (`pip install langgraph langgraph-checkpoint-sqlite`): a one-node
  graph looping N times on the SQLite checkpointer, `durability="sync"`
  (each step's checkpoint written before the next step). "no fsync" is
  `PRAGMA synchronous = OFF`, "fsync" is `FULL`.
- floor: the bare writes of one normalize step on the same disk, in a loop
  and nothing else: the journal's five lines (unsynced) and one checkpoint
  record appended to a second file, then (with fsync) one fdatasync of it.
  A durable step cannot cost less than this row; the target is feasible
  only where the floor leaves room for the engine's own work.

Counted with `strace -c -f` (200 and 400 steps, the difference): a durable
no-op step makes one fdatasync and six writes, the checkpoint record's one
and the journal's five lines (`step_started`, `decision_made`,
`action_started`, `action_finished`, `checkpoint_saved`: unsynced, since a
read-only step has no side effect to journal first); every 64 steps the
task file is rewritten (an fsync of it and one of its directory).
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def normalize_steps(steps: int, fsync: bool) -> float:
    """Milliseconds per no-op step of a `steps`-step workflow (in this process)."""
    from normalize.redact import Redactor
    from normalize.runner import RunOptions, run_task, start_task
    from normalize.store import TaskStore
    from normalize.task import Limits
    from normalize.workflow.spec import StepSpec, WorkflowSpec

    spec = WorkflowSpec(name="noop", path="<bench>", driver="workflow",
                        steps=[StepSpec(name=f"s{i}", action=f"note --turns 1 step {i}")
                               for i in range(1, steps + 1)])
    with tempfile.TemporaryDirectory(prefix="nbench-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        os.environ["NORMALIZE_HOME"] = str(home)
        store = TaskStore(home, fsync=fsync, redact=Redactor.for_workspace(work))
        options = RunOptions(workspace=work, store=store, fsync=fsync)
        task = start_task(spec, "bench", options, limits=Limits())
        start = time.perf_counter()
        outcome = run_task(task, options)
        took = time.perf_counter() - start
        if outcome.status.value != "done":
            raise RuntimeError(f"the workflow ended {outcome.status.value}: {outcome.error}")
    return took / steps * 1000


JOURNAL_LINES = (131, 277, 305, 322, 110)  # bytes of a note step's five events, as written
RECORD_BYTES = 1800  # a checkpoint record mid-run (it grows to a 20-entry history)


def floor_steps(steps: int, fsync: bool) -> float:
    """Milliseconds per step of the bare writes a durable step makes (see the module doc)."""
    lines = [b"e" * (size - 1) + b"\n" for size in JOURNAL_LINES]
    record = b"r" * (RECORD_BYTES - 1) + b"\n"
    with tempfile.TemporaryDirectory(prefix="nfloor-") as tmp:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        journal = os.open(Path(tmp) / "ID.jsonl", flags, 0o600)
        log = os.open(Path(tmp) / "ID.ckpt", flags, 0o600)
        start = time.perf_counter()
        for _ in range(steps):
            for line in lines:
                os.write(journal, line)
            os.write(log, record)
            if fsync:
                os.fdatasync(log)
        took = time.perf_counter() - start
        os.close(journal)
        os.close(log)
    return took / steps * 1000


def langgraph_steps(steps: int, fsync: bool) -> float:
    """Milliseconds per step of a one-node LangGraph loop on the SQLite checkpointer."""
    import sqlite3
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, StateGraph

    class State(TypedDict):
        i: int

    def step(state: State) -> dict[str, int]:
        return {"i": state["i"] + 1}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.set_entry_point("step")
    graph.add_conditional_edges("step", lambda s: END if s["i"] >= steps else "step")
    with tempfile.TemporaryDirectory(prefix="lgbench-") as tmp:
        conn = sqlite3.connect(str(Path(tmp) / "cp.sqlite"), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        conn.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'OFF'}")
        app = graph.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10}
        start = time.perf_counter()
        app.invoke({"i": 0}, config, durability="sync")
        took = time.perf_counter() - start
        conn.close()
    return took / steps * 1000


def langgraph_available() -> bool:
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def _one(kind: str, steps: int, fsync: bool, base: str | None) -> float:
    """One figure, measured in a fresh process."""
    env = dict(os.environ)
    if kind == "base" and base:
        env["PYTHONPATH"] = base
    out = subprocess.run([sys.executable, str(Path(__file__)), "--one", kind,
                          "--steps", str(steps)] + (["--fsync"] if fsync else []),
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(out.stdout.strip())


def interleaved(steps: int, rounds: int, base: str | None = None) -> dict[str, float]:
    """Median ms per step for each contender and fsync setting, measured round-robin."""
    kinds = ["normalize"] + (["base"] if base else []) + \
        (["langgraph"] if langgraph_available() else []) + ["floor"]
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for kind in kinds:
            for fsync in (False, True):
                key = f"{kind} {'fsync' if fsync else 'no fsync'}"
                times.setdefault(key, []).append(_one(kind, steps, fsync, base))
    return {key: statistics.median(values) for key, values in times.items()}


RUNS = {"normalize": normalize_steps, "base": normalize_steps, "langgraph": langgraph_steps,
        "floor": floor_steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", help="an older normalize source tree to measure beside")
    parser.add_argument("--one", choices=sorted(RUNS), help=argparse.SUPPRESS)
    parser.add_argument("--fsync", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(f"{RUNS[args.one](args.steps, args.fsync):.4f}")
        return 0
    figures = interleaved(args.steps, args.rounds, args.base)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
