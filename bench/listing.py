"""Listing a big store: `normalize tasks` and `normalize resume last` with 10 and 10,000 tasks.

    python bench/listing.py                    # 10 and 10,000 tasks, 5 interleaved rounds
    python bench/listing.py --base /tmp/old    # also an older normalize tree, for ratios

Each task is made as a run makes it: an owner file, its driver config beside
it (a 200-step workflow's spec) and the task file, so a listing that read
the configs would pay for it. Every command is a fresh process (`python -m
normalize.cli.app`), timed to its exit; the contenders and store sizes run
in turn, round after round. `resume last` finds the newest task done and
says so: the figure is finding and loading it, not running it.

Start-up is measured as users meet it: each tree's `normalize/` is compiled
first (`python -m compileall -q`; this machine sets PYTHONDONTWRITEBYTECODE,
so without it every run would recompile). Each store is settled as one in
daily use is (its `tasks/` unchanged for a while: its mtime set an hour
back), and listed once before the timing, which seals its index.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import compile_tree


def make_store(home: Path, count: int) -> None:
    """`count` finished tasks of a 200-step workflow, laid out as runs leave them.

    Written directly (the store's own writes take ~1 ms each, too slow for
    10,000 on a loaded machine), then the task index built by the store.
    """
    from normalize.store import TaskStore, index
    from normalize.task import Task, TaskStatus

    spec = {"spec": {"name": "flow", "steps": [{"name": f"s{i}", "action": f"note {i}"}
                                               for i in range(200)]}}
    config = json.dumps(spec).encode()
    tasks = home / "tasks"
    tasks.mkdir(parents=True)
    entries = []
    for number in range(count):
        task = Task.new(f"goal number {number}", "/tmp", "workflow",
                        status=TaskStatus.DONE, turn=200)
        task.updated_at += number  # the newest last
        data = task.to_dict()
        del data["driver_config"]
        data["driver_config_file"] = "config-0123456789abcdef.json"
        (tasks / task.id).mkdir()
        (tasks / task.id / data["driver_config_file"]).write_bytes(config)
        (tasks / f"{task.id}.owner").write_text(json.dumps({"pid": 1, "epoch": 1}))
        (tasks / f"{task.id}.json").write_text(json.dumps(data))
        entries.append((task.id, index.summary_of(data),
                        index.stamp(tasks / f"{task.id}.json")))
    index.rewrite(tasks, entries)
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(tasks, ns=(hour_ago, hour_ago))
    assert TaskStore(home).summaries()[1] == []  # (this listing seals the index)


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    # not from the source tree: `-m` would put the working directory first on the path
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, cwd=tempfile.gettempdir())
    return time.perf_counter() - start


def measure(sizes: tuple[int, ...], rounds: int, base: str | None) -> dict[str, float]:
    """Median seconds per (tree, command, store size), measured round-robin."""
    trees = {"normalize": str(Path(__file__).resolve().parent.parent)}
    if base:
        trees["base"] = base
    for tree in trees.values():
        compile_tree(Path(tree))
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="nlist-") as tmp:
        homes = {}
        for size in sizes:
            homes[size] = Path(tmp) / f"home{size}"
            make_store(homes[size], size)
        for _ in range(rounds):
            for name, tree in trees.items():
                for size, home in homes.items():
                    env = {**os.environ, "NORMALIZE_HOME": str(home), "PYTHONPATH": tree}
                    for command in (["tasks"], ["resume", "last"]):
                        key = f"{name} {' '.join(command)} {size}"
                        argv = [sys.executable, "-m", "normalize.cli.app", *command]
                        times.setdefault(key, []).append(timed(argv, env))
    return {key: statistics.median(values) for key, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", help="an older normalize source tree to measure beside")
    args = parser.parse_args(argv)
    figures = measure((10, args.tasks), args.rounds, args.base)
    print(json.dumps({k: round(v * 1000, 1) for k, v in figures.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
