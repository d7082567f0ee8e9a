"""Fan-out: 8 sleeping steps with `parallel = true` against the same 8 in sequence.

    python bench/parallel.py                 # 8 steps of 0.5 s each
    python bench/parallel.py --sleep 0.2 --steps 16

Both runs go through the whole stack — the TOML loader, the workflow driver,
the engine (events, journal, checkpoints) and the real `run` tool starting
`sleep` processes — in one process, one after the other, on a temporary
workspace and store. The ratio is sequential wall time over parallel wall
time; with 8 steps it should be close to 8 (the acceptance bar is 4).
`parallel_ratio()` returns the figures for other scripts (bench/run.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

WORKFLOW = """\
[workflow]
name = "{name}"
description = "{steps} steps that sleep {sleep} s each"

[workflow.vars]
items = [{items}]

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "sleep"
for_each = "items"
as = "n"
{parallel}
action = "run sleep {sleep}"
"""


def _run(root: Path, *, parallel: bool, steps: int, sleep: float) -> tuple[float, Any]:
    from normalize.runner import RunOptions, run_task, start_task
    from normalize.store import TaskStore
    from normalize.workflow.loader import load_workflow

    name = "fan-out" if parallel else "in-sequence"
    path = root / f"{name}.toml"
    path.write_text(WORKFLOW.format(
        name=name, steps=steps, sleep=sleep,
        items=", ".join(f'"{i}"' for i in range(1, steps + 1)),
        parallel=f"parallel = true\nmax_concurrency = {steps}" if parallel else "",
    ))
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    options = RunOptions(workspace=workspace, store=TaskStore(root / "home", fsync=False))
    task = start_task(load_workflow(path), name, options)
    started = time.perf_counter()
    outcome = run_task(task, options)
    elapsed = time.perf_counter() - started
    if outcome.status.value != "done":
        raise RuntimeError(f"{name}: {outcome.status.value}: {outcome.error}")
    return elapsed, outcome


def parallel_ratio(steps: int = 8, sleep: float = 0.5) -> dict[str, Any]:
    """Sequential and parallel wall times of `steps` sleeping steps, and their ratio."""
    with tempfile.TemporaryDirectory(prefix="normalize-bench-") as tmp:
        root = Path(tmp)
        sequential, _ = _run(root, parallel=False, steps=steps, sleep=sleep)
        fanned, _ = _run(root, parallel=True, steps=steps, sleep=sleep)
    return {
        "steps": steps,
        "sleep_s": sleep,
        "sequential_s": round(sequential, 3),
        "parallel_s": round(fanned, 3),
        "ratio": round(sequential / fanned, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=0.5)
    args = parser.parse_args(argv)
    figures = parallel_ratio(args.steps, args.sleep)
    print(f"| steps | sleep | in sequence | parallel = true | ratio |\n"
          f"|---|---|---|---|---|\n"
          f"| {figures['steps']} | {figures['sleep_s']:g} s | {figures['sequential_s']:.2f} s "
          f"| {figures['parallel_s']:.2f} s | {figures['ratio']:.1f}× |")
    return 0 if figures["ratio"] >= 4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
