"""A `for_each` over N items beside N plain steps; a long TOML workflow's load; `tasks show`.

    python bench/loops.py                     # 10,000 items, 3 interleaved rounds
    python bench/loops.py --base /tmp/old     # also an older normalize tree

Rows (each a fresh process, contenders in turn, medians):
- ms per step of a `for_each` over N items (`lines:` source, a `note --turns 1`
  action) and of N plain steps (the no-op workflow), and the checkpoint's
  bytes (from `checkpoint_saved`) at item 100 and at item N;
- seconds to load an N-step TOML workflow (`load_workflow`);
- peak memory (max RSS) of `normalize tasks show ID` for a task of N steps.
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


def loop_run(count: int, kind: str) -> dict[str, float]:
    """Run `count` iterations as a for_each (`kind="for_each"`) or as plain steps."""
    from normalize.runner import RunOptions, run_task, start_task
    from normalize.store import TaskStore
    from normalize.task import Limits
    from normalize.workflow.spec import StepSpec, WorkflowSpec

    if kind == "for_each":
        items = "\n".join(f"item-{i}" for i in range(count))
        steps = [StepSpec(name="each", for_each=f"lines:{items}", as_="x",
                          action="note --turns 1 at {{ x }}")]
    else:
        steps = [StepSpec(name=f"s{i}", action=f"note --turns 1 at item-{i}")
                 for i in range(count)]
    spec = WorkflowSpec(name="loop", path="<bench>", driver="workflow", steps=steps)
    sizes: dict[int, int] = {}
    finished = [0]

    def watch(event: Any) -> None:
        if event.type == "action_finished":
            finished[0] += 1
        elif event.type == "checkpoint_saved" and finished[0] in (100, count):
            sizes.setdefault(finished[0], event.bytes)

    with tempfile.TemporaryDirectory(prefix="nbench-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        options = RunOptions(workspace=work, store=TaskStore(home, fsync=False), fsync=False,
                             subscribers=[watch])
        task = start_task(spec, "bench", options, limits=Limits())
        start = time.perf_counter()
        outcome = run_task(task, options)
        took = time.perf_counter() - start
        if outcome.status.value != "done":
            raise RuntimeError(f"ended {outcome.status.value}: {outcome.error}")
    return {"ms": took / count * 1000, "bytes_100": sizes.get(100, 0),
            "bytes_n": sizes.get(count, 0)}


def toml_text(count: int) -> str:
    parts = ['[workflow]\nname = "long"\n']
    parts += [f'[[workflow.steps]]\nname = "s{i}"\naction = "note --turns 1 step {i}"\n'
              for i in range(count)]
    return "\n".join(parts)


def toml_load(path: str) -> dict[str, float]:
    from normalize.workflow.loader import load_workflow

    start = time.perf_counter()
    load_workflow(path)
    return {"s": time.perf_counter() - start}


def _one(args: list[str], tree: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, str(Path(__file__)), "--one", *args],
                         capture_output=True, text=True, env=env, check=False,
                         cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1:])
    result: dict[str, float] = json.loads(out.stdout)
    return result


def show_peak(steps: int, tree: str) -> float:
    """Max RSS (MB) of `normalize tasks show ID` for a finished `steps`-step task."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import engine

    with tempfile.TemporaryDirectory(prefix="nshow-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        _, task_id = engine.run_steps(steps, home=home, work=work)
        env = {**os.environ, "NORMALIZE_HOME": str(home), "PYTHONPATH": tree}
        # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
        code = ("import runpy, sys; sys.argv = ['normalize', 'tasks', 'show', "
                f"'{task_id}']\ntry: runpy.run_module('normalize.cli.app', run_name='__main__')\n"
                "except SystemExit: pass\nprint([l.split()[1] for l in open('/proc/self/status')"
                " if l.startswith('VmHWM')][0], file=sys.stderr)")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=False, cwd=tmp)
        return int(out.stderr.strip().splitlines()[-1]) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", help="an older normalize source tree to measure beside")
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        kind, value = args.one[0], args.one[1]
        print(json.dumps(toml_load(value) if kind == "toml" else loop_run(int(value), kind)))
        return 0
    print(json.dumps(main_figures(args.items, args.rounds, args.base), indent=2))
    return 0


def main_figures(items: int, rounds: int, base: str | None = None) -> dict[str, Any]:
    """Every figure of this module, for this tree (and `base`), measured round-robin."""
    trees = {"normalize": str(Path(__file__).resolve().parent.parent)}
    if base:
        trees["base"] = base
    figures: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="ntoml-") as tmp:
        toml = Path(tmp) / "long.toml"
        toml.write_text(toml_text(items))
        for _ in range(rounds):
            for name, tree in trees.items():
                for kind in ("for_each", "steps"):
                    figures.setdefault(f"{name} {kind}", []).append(
                        _one([kind, str(items)], tree))
                figures.setdefault(f"{name} toml", []).append(_one(["toml", str(toml)], tree))
    result: dict[str, Any] = {
        key: {k: statistics.median(v[k] for v in values) for k in values[0]}
        for key, values in figures.items()}
    for name, tree in trees.items():
        result[f"{name} tasks show MB"] = show_peak(items, tree)
    return result


if __name__ == "__main__":
    sys.exit(main())
