"""What a workspace checkpoint costs: a generated 5,000-file workspace, one file changed a step.

    python bench/checkpoints.py                 # 5,000 files, 100 steps
    python bench/checkpoints.py --files 20000 --steps 300

Each step changes one file, appends one event to a journal (fsynced, as a
side-effecting action's `action_finished` is) and takes a checkpoint through
`WorkspaceCheckpoints.take`, the engine's hook. The first checkpoint of a
task is timed on a fresh store (every file hashed and stored) and again on a
store that already holds the workspace (a second task there). Store growth
is the shadow store's size on disk before and after the steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from normalize.checkpoints import WorkspaceCheckpoints
from normalize.events import ActionFinished, Emitter
from normalize.store import TaskStore
from normalize.task import Action, Task


def make_workspace(root: Path, files: int) -> list[Path]:
    """`files` small Python modules, 100 to a directory."""
    paths = []
    for number in range(files):
        folder = root / f"pkg{number // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"mod{number % 100:02d}.py"
        path.write_text("".join(f"def f{i}(x):\n    return x + {number * 10 + i}\n\n"
                                for i in range(8)))
        paths.append(path)
    (root / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    return paths


def size_on_disk(path: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def size_of_files(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def growth(size: int, steps: int) -> str:
    return f"{size / 1024:,.0f} KiB ({size / steps / 1024:.1f} KiB/step)"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        paths = make_workspace(ws, args.files)
        store = TaskStore(home)
        recorder = WorkspaceCheckpoints.for_workspace(ws, home, store.task_path)
        assert recorder is not None
        task = Task.new(goal="bench", workspace=str(ws), driver="bench")
        store.save(task)

        started = time.perf_counter()
        events = recorder.take(task)
        first = time.perf_counter() - started
        assert events and events[0].type == "checkpoint_taken", events
        second_task = Task.new(goal="bench 2", workspace=str(ws), driver="bench")
        store.save(second_task)
        started = time.perf_counter()
        recorder.take(second_task)
        first_again = time.perf_counter() - started
        base = size_on_disk(recorder.repo.root)
        base_bytes = size_of_files(recorder.repo.root)

        journal = store.journal(task.id)
        emitter = Emitter(task.id, journal=journal)
        take: list[float] = []
        append: list[float] = []
        before: list[float] = []
        time.sleep(1.1)  # past the index's racy second, as a real step would be
        for step in range(args.steps):
            path = paths[(step * 37) % len(paths)]
            action = Action("edit", {}, text=f"edit {path.name}", key=f"{step}.0")
            b0 = time.perf_counter()
            recorder.before(task, action)  # the engine's hook just before a side effect
            before.append(time.perf_counter() - b0)
            with open(path, "a") as fh:
                fh.write(f"# step {step}\n")
            t0 = time.perf_counter()
            emitter.emit(ActionFinished(turn=step, key=action.key, tool="edit",
                                        command=action.text, status="success"), durable=True)
            t1 = time.perf_counter()
            taken = recorder.take(task, action)
            t2 = time.perf_counter()
            assert taken[0].type == "checkpoint_taken" and taken[0].files == 1, taken  # type: ignore[attr-defined]
            append.append(t1 - t0)
            take.append(t2 - t1)
            task.turn += 1
            if step % 10 == 9:
                recorder.settle(task)
        journal.close()
        grown = size_on_disk(recorder.repo.root) - base
        grown_bytes = size_of_files(recorder.repo.root) - base_bytes

    rows = [
        ("files in the workspace", f"{args.files:,}"),
        ("first checkpoint, fresh store", f"{first * 1000:,.0f} ms"),
        ("first checkpoint of a second task", f"{first_again * 1000:,.0f} ms"),
        ("snapshot just before an action: median", f"{statistics.median(before) * 1000:.1f} ms"),
        ("checkpoint, one file changed: median", f"{statistics.median(take) * 1000:.1f} ms"),
        ("checkpoint, one file changed: p90", f"{percentile(take, 0.9) * 1000:.1f} ms"),
        ("journal append (fsynced): median", f"{statistics.median(append) * 1000:.2f} ms"),
        ("checkpoint + journal: median",
         f"{statistics.median([a + b for a, b in zip(take, append, strict=True)]) * 1000:.1f} ms"),
        ("store after the first checkpoint", f"{base / 1024:,.0f} KiB"),
        (f"store growth over {args.steps} steps, on disk", growth(grown, args.steps)),
        (f"store growth over {args.steps} steps, bytes", growth(grown_bytes, args.steps)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>22}")
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
