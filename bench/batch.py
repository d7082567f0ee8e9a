"""What a batch costs per item: one by one (`normalize run`), `batch` locally, `batch` on Ray.

    python bench/batch.py                  # 8 items; 1, 2 and 4 workers; a 2-node cluster
    python bench/batch.py --items 16 --no-ray
    python bench/batch.py --scale 100,1000 --before REV   # the batch's cost as it grows
    python bench/batch.py --overhead 1000 [--kinds fresh,warm,ray-fresh,ray-warm]

Each item is a generated git repository and a two-step workflow (an edit and
a check, each a sandboxed program). "One by one" runs `normalize run` once per
item in a row; `batch` runs them with `--concurrency` 1, 2 and 4, locally and
on a Ray cluster started here (a head without CPUs and two nodes of 2 CPUs).
Per-item figures are the wall time over the item count; "× one by one" is
the wall time beside running the items one by one. With one worker the
items run in a row, so their journals split the time: "first item" is the
time from the batch's start (its manifest) to the first item's run, the
fixed cost (for Ray: importing it, joining the cluster, a worker's start),
and "gap" the median time between one item's end and the next one's start,
the cost each further item pays (a `normalize` process's start, and for Ray
scheduling the task on a worker). Recovery is the time
from removing the node an item runs on to the item running again on the other
node. Peak memory is the largest sum of the resident sizes of the cluster's
processes (GCS, raylets, workers) sampled while the batch ran.

`--scale` runs one-step items (each appends a line to a file in its own
directory) on the local pool, 4 in flight, at each count: the wall time per
item, the parent's own CPU per item (its user and system time, not its
items'), and the time of `batch status`, `batch collect -o` and `resume` of
the finished batch, each beside its figure at the first count. With
`--before REV` the same runs are made first with normalize as it was at REV
(its source exported from git, put first on PYTHONPATH), in the same run.
`--scale` also gives the parent's peak memory (its ru_maxrss) and the data
home's size on disk; `--workers fresh` runs the items as fresh processes.

`--overhead N` makes N+1 one-step items (as a batch's parent makes them) per
kind of executor and runs them one at a time: each item's wall time from its
submit to the executor saying it ended, less its own run as its journal times
it (run_started to run_ended), the first item (a worker's start) left out;
for warm workers also the time outside the item's `main` (the fork, the
answers on the pipe, the exit). Medians, each kind beside the one before.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PY = sys.executable
WORKFLOW = """[workflow]
name = "bench"
workspace = "dir:{item.path}"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "edit"
action = "run sh -c 'echo {item.word} >> f.txt'"
[[workflow.steps]]
name = "wait"
on_interrupt = "rerun"
action = "run sh -c 'while [ -n \\"{item.gate}\\" ] && [ ! -e \\"{item.gate}\\" ]; do \
sleep 0.05; done'"
[[workflow.steps]]
name = "check"
action = "run grep -q {item.word} f.txt"
"""
ONE = WORKFLOW.replace('workspace = "dir:{item.path}"\n', "").replace(
    "{item.word}", "{word}").replace('[workflow.permissions]', '[workflow.vars]\nword = ""\n'
                                     '[workflow.permissions]').replace(
    '[ -n \\"{item.gate}\\" ] && [ ! -e \\"{item.gate}\\" ]', "false")


SCALE_WORKFLOW = """[workflow]
name = "scale"
workspace = "dir:{item.path}"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "edit"
action = "run sh -c 'echo {item.word} >> f.txt'"
"""
# the parent in this process's child, its own CPU time and peak memory written at its exit
PARENT = """import atexit, os, resource, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(repr((sum(os.times()[:2]),
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))))
sys.argv = ["normalize", *sys.argv[2:]]
from normalize.cli.app import main
sys.exit(main())
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=cwd,
                   check=True, capture_output=True)


def setup(root: Path, count: int, gate: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "wf.toml").write_text(WORKFLOW)
    (root / "one.toml").write_text(ONE)
    rows = []
    for number in range(count):
        repo = root / f"r{number:03d}"
        repo.mkdir()
        (repo / "f.txt").write_text(f"{number}\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "s")
        rows.append({"path": repo.name, "word": f"w{number}", "gate": gate})
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def env(home: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("NORMALIZE_")}
    out.update(NORMALIZE_HOME=str(home), CI="true")
    return out


def timed(argv: list[str], cwd: Path, home: Path) -> float:
    started = time.perf_counter()
    subprocess.run([PY, "-m", "normalize.cli.app", *argv], cwd=cwd, env=env(home), check=True,
                   capture_output=True, timeout=3600)
    return time.perf_counter() - started


def one_by_one(root: Path, count: int) -> float:
    started = time.perf_counter()
    for number in range(count):
        repo = str(root / f"r{number:03d}")
        timed(["run", str(root / "one.toml"), "--var", f"word=w{number}", "-w", repo], root,
              root / "home")
    return time.perf_counter() - started


def phases(home: Path) -> tuple[float | None, float | None]:
    """From the items' journals: the first item's start after the batch's, and the median
    time between one item's end and the next one's start (None: no batch, or too few)."""
    manifests = list(home.glob("batches/*/manifest.json"))
    parent = manifests[0].parent.name if manifests else ""
    spans = []
    for path in (home / "tasks").glob("*.jsonl"):
        if path.stem == parent:  # the batch's own run: not an item
            continue
        times = [event["ts"] for event in map(json.loads, path.read_text().splitlines())
                 if isinstance(event, dict) and "ts" in event]
        if times:
            spans.append((times[0], times[-1]))
    spans.sort()
    first = spans[0][0] - manifests[0].stat().st_mtime if manifests and spans else None
    gaps = sorted(b[0] - a[1] for a, b in itertools.pairwise(spans))
    return first, gaps[len(gaps) // 2] if gaps else None


def batch(root: Path, executor: str, workers: int, address: str = "") -> float:
    argv = ["batch", "wf.toml", "--items", "items.jsonl", "--executor", executor,
            "--concurrency", str(workers)]
    return timed([*argv, "--address", address] if address else argv, root, root / "home")


class Sampler:
    """The largest summed RSS (MB) of the processes whose command line names ray's."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            total = 0
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"ray" not in cmd:
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
                except OSError:
                    continue
            self.peak = max(self.peak, total / 1024)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def recovery(cluster: Any, root: Path) -> float:
    """Seconds from removing the node an item runs on to the item running on another."""
    gate = Path(tempfile.mkdtemp(prefix="gate-", dir=Path.home())) / "gate"
    setup(root, 1, str(gate))
    home = root / "home"
    proc = subprocess.Popen([PY, "-m", "normalize.cli.app", "batch", "wf.toml", "--items",
                             "items.jsonl", "--executor", "ray", "--address", cluster.address],
                            cwd=root, env={**env(home), "HOME": str(Path.home())},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        node_file = _wait_node_file(home)
        first = node_file.read_text()
        node = next(n for n in cluster.list_all_nodes() if n.node_id == first)
        started = time.perf_counter()
        cluster.remove_node(node)
        while node_file.read_text() == first:
            time.sleep(0.02)
        return time.perf_counter() - started
    finally:
        gate.write_text("go")
        proc.wait(600)


def _wait_node_file(home: Path) -> Path:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = list((home / "tasks").glob("*/node")) if (home / "tasks").is_dir() else []
        if found:
            return found[0]
        time.sleep(0.05)
    raise SystemExit("the item never started on the cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--scale", metavar="N,N", default="",
                        help="item counts for the figures of a growing batch (local pool)")
    parser.add_argument("--before", metavar="REV", default="",
                        help="with --scale: the same figures for normalize at REV first")
    parser.add_argument("--after", metavar="REV", default="",
                        help="with --scale: normalize at REV rather than this tree")
    parser.add_argument("--workers", choices=("warm", "fresh"), default="warm",
                        help="with --scale: the local pool's item slots")
    parser.add_argument("--overhead", type=int, metavar="N", default=0,
                        help="the per-item overhead of fresh processes and warm workers, "
                             "N items each, one at a time")
    parser.add_argument("--kinds", default="fresh,warm",
                        help="with --overhead: of fresh, warm, ray-fresh, ray-warm")
    parser.add_argument("--overhead-run", nargs=3, metavar=("KIND", "ROOT", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.overhead_run:
        kind, root, number = args.overhead_run
        print(json.dumps(overhead_run(kind, Path(root), int(number))))
        return
    if args.overhead:
        overhead(args.overhead, args.kinds.split(","))
        return
    if args.scale:
        scale([int(n) for n in args.scale.split(",")], args.before, args.after, args.workers)
        return
    count = args.items
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    rows: list[tuple[str, float, Path]] = []
    total = one_by_one(setup(work / "one", count), count)
    rows.append(("one by one (normalize run)", total, work / "one"))
    for workers in (1, 2, 4):
        rows.append((f"batch local, {workers} worker(s)",
                     batch(setup(work / f"local{workers}", count), "local", workers),
                     work / f"local{workers}"))
    peak = recovered = 0.0
    if not args.no_ray:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        from ray.cluster_utils import Cluster

        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20})
        for _ in range(2):
            cluster.add_node(num_cpus=2, object_store_memory=80 << 20)
        cluster.wait_for_nodes()
        print(f"cluster (head + 2 nodes) started in {time.perf_counter() - started:.1f} s")
        try:
            with Sampler() as sampler:
                for workers in (1, 2, 4):
                    rows.append((f"batch ray, {workers} worker(s)",
                                 batch(setup(work / f"ray{workers}", count), "ray", workers,
                                       cluster.address), work / f"ray{workers}"))
            peak = sampler.peak
            recovered = recovery(cluster, work / "recovery")
        finally:
            cluster.shutdown()
    print(f"{count} items, each: an edit and a check (sandboxed programs)\n")
    print(f"{'how':<32} {'wall s':>8} {'per item s':>11} {'× one by one':>13} "
          f"{'first item s':>13} {'gap s':>6}")
    for name, seconds, root in rows:
        first, gap = phases(root / "home") if "1 worker" in name or "one" in name else \
            (None, None)
        print(f"{name:<32} {seconds:>8.2f} {seconds / count:>11.2f} {seconds / total:>13.2f} "
              f"{_shown(first):>13} {_shown(gap):>6}")
    if not args.no_ray:
        print(f"\nrecovery after a node is removed: {recovered:.2f} s to run again elsewhere")
        print(f"peak memory of the cluster's processes: {peak:.0f} MB")


def scale_setup(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    (root / "wf.toml").write_text(SCALE_WORKFLOW)
    rows = []
    for number in range(count):
        where = root / f"d{number:05d}"
        where.mkdir()
        (where / "f.txt").write_text(f"{number}\n")
        rows.append({"path": where.name, "word": f"w{number}"})
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def scale_run(root: Path, count: int, source: str, workers: str = "warm") -> dict[str, float]:
    """One batch of `count` items, then status, collect and resume of it (seconds)."""
    scale_setup(root, count)
    home = root / "home"
    run_env = {**env(home), "NORMALIZE_BATCH_WORKERS": workers}
    if source:
        run_env["PYTHONPATH"] = source
    cpu = root / "parent.cpu"

    def normalize(*argv: str) -> float:
        started = time.perf_counter()
        subprocess.run([PY, "-c", PARENT, str(cpu), *argv], cwd=root, env=run_env,
                       check=True, capture_output=True, timeout=7200)
        return time.perf_counter() - started

    wall = normalize("batch", "wf.toml", "--items", "items.jsonl", "--concurrency", "4")
    parent_cpu, peak_kb = _parent(cpu.read_text())
    batch_dir = next(home.glob("batches/*/manifest.json")).parent.name
    return {"per item s": wall / count, "parent CPU ms/item": parent_cpu / count * 1000,
            "parent peak MB": peak_kb / 1024, "home MB": _size(home) / 1e6,
            "home KB/item": _size(home) / 1e3 / count,
            "status s": normalize("batch", "status", batch_dir),
            "collect s": normalize("batch", "collect", batch_dir, "-o", str(root / "out")),
            "resume s": normalize("resume", batch_dir)}


def _parent(text: str) -> tuple[float, float]:
    """The parent's CPU seconds and peak RSS (KB) as it wrote them (an old tree: CPU only)."""
    value = ast.literal_eval(text)  # (written by PARENT above: a float, or a pair)
    return (float(value[0]), float(value[1])) if isinstance(value, tuple) else \
        (float(value), float("nan"))


def _size(root: Path) -> int:
    """Bytes on disk under `root` (its blocks, as `du` counts them)."""
    total = 0
    for where, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(where, name)).st_blocks * 512
            except OSError:
                continue
    return total


def exported(rev: str, work: Path) -> str:
    """The package as it was at `rev` (exported from git); the directory to import it from."""
    repo = Path(__file__).resolve().parent.parent
    dest = work / f"src-{rev.replace('/', '-')}"
    dest.mkdir()
    archive = subprocess.run(["git", "archive", rev, "normalize"], cwd=repo, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return str(dest)


def scale(counts: list[int], before: str, after: str = "", workers: str = "warm") -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    versions = [(f"before ({before})", exported(before, work))] if before else []
    versions.append((f"after ({after})", exported(after, work)) if after else
                    ("after (this tree)", ""))
    print(f"one-step items, local pool ({workers} workers where the tree has them), "
          f"4 in flight; counts {counts}\n")
    for number, (name, source) in enumerate(versions):
        figures = {}
        for count in counts:  # each said as it comes (a long run's first counts are kept)
            figures[count] = scale_run(work / f"v{number}-{count}", count, source, workers)
            print(f"  {name}, {count} items: {json.dumps(figures[count])}", flush=True)
        base = figures[counts[0]]
        print(name)
        print(f"  {'figure':<20}" + "".join(f"{count:>10} {'×':>6}" for count in counts))
        for key in base:
            cells = "".join(f"{figures[c][key]:>10.3f} {figures[c][key] / base[key]:>6.2f}"
                            for c in counts)
            print(f"  {key:<20}{cells}")
        for low, high in itertools.pairwise(counts):  # the parent's start-up left out
            cpu = (figures[high]["parent CPU ms/item"] * high -
                   figures[low]["parent CPU ms/item"] * low) / (high - low)
            print(f"  parent CPU per further item, {low} to {high}: {cpu:.2f} ms")
        print(flush=True)


def overhead_run(kind: str, root: Path, count: int) -> dict[str, float]:
    """In a process of its own (its NORMALIZE_HOME set): `count` one-step items made as a
    batch's parent makes them, then run one at a time through the executor `kind`, each
    timed from its submit to the executor saying it ended, beside its own run as its journal
    times it (run_started to run_ended). The first item (a worker's start) is left out."""
    from normalize.batch.begin import BatchRequest, start_batch
    from normalize.batch.items import read_items
    from normalize.batch.items_make import make_item
    from normalize.batch.manifest import item_id
    from normalize.execution.executor import ChildJob, Executor
    from normalize.runner import RunOptions
    from normalize.store import TaskStore

    scale_setup(root, count + 1)
    store = TaskStore(root / "home")
    options = RunOptions(workspace=root, store=store)
    request = BatchRequest(workflow=str(root / "wf.toml"),
                           items=read_items(str(root / "items.jsonl")))
    manifest = start_batch(request, options, store)
    ids = [item_id(manifest.batch, n) for n in range(count + 1)]
    for position, task_id in enumerate(ids):
        make_item(manifest, position, task_id, RunOptions(workspace=root, store=store), store,
                  None)
    executor: Executor
    if kind == "warm":
        from normalize.execution.warm import WarmExecutor

        executor = WarmExecutor(1)
    elif kind.startswith("ray"):  # a one-machine cluster of one CPU, started here
        from normalize.execution.ray import RayExecutor

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        executor = RayExecutor(None, 1, warm=kind == "ray-warm")
    else:
        from normalize.execution.local import LocalExecutor

        executor = LocalExecutor(1)
    walls, mains = [], []
    for task_id in ids:
        started = time.perf_counter()
        handle = executor.submit(ChildJob(task_id, str(store.home)))
        assert executor.collect(handle, None) == 0, task_id
        walls.append(time.perf_counter() - started)
        mains.append(getattr(executor, "main_s", None) or float("nan"))
    owns = [_own(store.journal_path(task_id)) for task_id in ids]
    over = [wall - own for wall, own in zip(walls, owns, strict=True)][1:]
    return {"first s": walls[0], "wall ms": statistics.median(walls[1:]) * 1000,
            "own run ms": statistics.median(owns[1:]) * 1000,
            "overhead ms": statistics.median(over) * 1000,
            "overhead p90 ms": sorted(over)[int(len(over) * 0.9)] * 1000,
            "main() less run ms": statistics.median(
                m - o for m, o in zip(mains[1:], owns[1:], strict=True)) * 1000,
            "outside main() ms": statistics.median(
                w - m for w, m in zip(walls[1:], mains[1:], strict=True)) * 1000}


def _own(journal: Path) -> float:
    """The item's run as its journal times it: from run_started to run_ended."""
    times = {event["type"]: event["ts"] for event in map(json.loads,
                                                          journal.read_text().splitlines())
             if event.get("type") in ("run_started", "run_ended")}
    return float(times["run_ended"] - times["run_started"])


def overhead(count: int, kinds: list[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    print(f"per-item overhead: {count} one-step items each way, one at a time (medians; "
          "overhead = submit to end, less the item's own run)\n")
    rows = {}
    for kind in kinds:
        root = work / kind
        done = subprocess.run([PY, __file__, "--overhead-run", kind, str(root), str(count)],
                              env=env(root / "home"), check=True, capture_output=True,
                              text=True, timeout=7200)
        rows[kind] = json.loads(done.stdout.splitlines()[-1])
    print(f"{'figure':<20}" + "".join(f"{kind:>12}" for kind in kinds) +
          "".join(f"{b + '/' + a:>20}" for a, b in itertools.pairwise(kinds)))
    for key in rows[kinds[0]]:
        cells = [rows[kind][key] for kind in kinds]
        print(f"{key:<20}" + "".join(f"{cell:>12.2f}" for cell in cells) +
              "".join(f"{b / a:>20.3f}" for a, b in itertools.pairwise(cells)))


def _shown(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
