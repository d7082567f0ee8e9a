"""The `.git` fingerprint's cost per action: a cold walk, a warm one, and one after a change.

    python bench/gitguard.py                       # a generated tree of 100,000 files
    python bench/gitguard.py --files 20000 --per-dir 10
    python bench/gitguard.py --tree DIR            # any directory instead

The generated tree looks like a project with its dependencies: `--files`
empty files spread `--per-dir` to a directory, directories nested four deep
(`node_modules/pkgN/lib/…`), with a `.git` at the root, one below
`node_modules`, one below `.venv/src` and a `.normalize`. "cold" is the first
snapshot of a process (every directory listed); "warm" is the next one with
nothing changed (each directory only stat'ed); "after a change" follows a new
`.git` made deep in the tree (the directories on its way listed again). Each
figure is the median of `--repeat` runs; the cold one takes a new `GitGuard`
each time, with the page cache warm.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from normalize.sandbox.gitguard import GitGuard, GitSnapshot


def build(root: Path, files: int, per_dir: int) -> None:
    """An empty-file tree of `files` files, `per_dir` to a directory, with four repositories."""
    made = 0
    index = 0
    while made < files:
        a, b, c = index // 400, (index // 20) % 20, index % 20
        folder = root / "node_modules" / f"pkg{a}" / f"lib{b}" / f"mod{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(min(per_dir, files - made)):
            (folder / f"f{n}.js").touch()
        made += per_dir
        index += 1
    for repo in (root, root / "node_modules" / "pkg0", root / ".venv" / "src" / "pkg"):
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (root / ".normalize" / "workflows").mkdir(parents=True)
    (root / ".normalize" / "workflows" / "w.toml").write_text("[workflow]\nname = 'w'\n")


def timed(fn: Callable[[], GitSnapshot], repeat: int) -> tuple[str, GitSnapshot]:
    """Median wall and CPU milliseconds of `repeat` calls, and the last call's value."""
    wall, cpu = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), time.process_time()
        value = fn()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - used) * 1000)
    return f"{statistics.median(wall):8.1f} ms wall, {statistics.median(cpu):8.1f} ms CPU", value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--per-dir", type=int, default=10)
    parser.add_argument("--tree", type=Path)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gitguard-") as tmp:
        root = args.tree or Path(tmp)
        if args.tree is None:
            build(root, args.files, args.per_dir)
        dirs = sum(1 for _ in os.walk(root))
        time.sleep(2.1)  # past the racy window, so the warm walk trusts every ctime
        cold, snap = timed(lambda: GitGuard(root).snapshot(), args.repeat)
        guard = GitGuard(root)
        guard.snapshot()
        warm, _ = timed(guard.snapshot, args.repeat)
        deep = root / "node_modules" / "pkg3" / "lib4" / "mod5"
        made = iter(range(args.repeat))

        def after_change() -> GitSnapshot:
            subprocess.run(["git", "init", "-q", str(deep / f"new{next(made)}")], check=True)
            return guard.snapshot()

        changed, _ = timed(after_change, args.repeat)  # git init's own time left in: see below
        def init_only() -> GitSnapshot:
            subprocess.run(["git", "init", "-q", str(deep / "x")], check=True)
            return snap

        init, _ = timed(init_only, args.repeat)
        print(f"tree: {root} ({dirs} directories), protected roots: {len(snap.roots)}, "
              f"watched entries: {len(snap.kept)}; load average {os.getloadavg()[0]:.1f}")
        print(f"cold snapshot:               {cold}")
        print(f"warm snapshot:               {warm}")
        print(f"git init + snapshot:         {changed} ({guard.walk.listed} directories listed)")
        print(f"git init alone:              {init}")


if __name__ == "__main__":
    main()
