"""What an isolated sub-task costs: making its copy, merging its diff back, and one child's run.

    python bench/subtasks.py                 # a 5,000-file workspace and this repository, 5 rounds
    python bench/subtasks.py --files 5000 --rounds 5 --children 3

Figures (median ms):
- copy: the workspace written out from the shadow store at a checkpoint
  (`read-tree` + `checkout-index`, `checkpoints/isolate.py`), with `.venv`
  linked; beside it what copying that `.venv` instead would cost;
- merge: the child's diff read (`add -A`, `write-tree`, `diff-tree`) and
  applied to the parent's workspace (`git apply`), for a child that edited 3 files;
- child: one trivial child run as its own `normalize` process (`resume ID`),
  the overhead per child beside doing the same work in the parent's task.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from normalize.checkpoints import isolate
from normalize.checkpoints.shadow import ShadowRepo

REPO = Path(__file__).resolve().parent.parent


def median_ms(rounds: int, work: Callable[[int], None]) -> float:
    times = []
    for number in range(rounds):
        start = time.perf_counter()
        work(number)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def fake_workspace(root: Path, files: int, venv_files: int) -> Path:
    """`files` small source files in nested folders, and a `.venv` of `venv_files` files."""
    ws = root / "ws"
    for number in range(files):
        path = ws / f"pkg{number % 50}" / f"mod{number // 50}" / f"f{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{number}():\n    return {number}\n" * 5)
    for number in range(venv_files):
        path = ws / ".venv" / "lib" / f"p{number % 40}" / f"m{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n" * 20)
    (ws / ".gitignore").write_text(".venv/\n")
    return ws


def measure(ws: Path, home: Path, rounds: int) -> dict[str, float]:
    repo = ShadowRepo(ws, home)
    tree = repo.snapshot(full=True).tree
    copies = home / "copies"
    out = {"copy": median_ms(rounds, lambda n: isolate.make_copy(
        repo, tree, copies / f"c{n}" / "ws"))}
    first = copies / "c0" / "ws"
    edited = [p.relative_to(first) for p in sorted(first.rglob("*.py"))
              if ".venv" not in p.parts][:3]
    originals = {rel: (ws / rel).read_bytes() for rel in edited}

    def merge(n: int) -> None:
        copy = copies / f"c{n}" / "ws"
        for rel in edited:
            (copy / rel).write_text((copy / rel).read_text() + f"# child {n}\n")
        changes = isolate.changes(repo, tree, copy)
        assert not isolate.apply(repo, changes.patch, copy.parent), "merge refused"
        for rel, data in originals.items():  # the parent as it was, for the next round
            (ws / rel).write_bytes(data)

    out["merge"] = median_ms(rounds, merge)
    venv = ws / ".venv"
    if venv.is_dir():
        out["venv_copy"] = median_ms(rounds, lambda n: shutil.copytree(
            venv, home / f"venv{n}", symlinks=True))
    for n in range(rounds):
        isolate.remove_copy(copies / f"c{n}" / "ws")
    return out


def child_overhead(rounds: int) -> tuple[float, float]:
    """(a parent with no child, a parent whose one child only says done): median ms."""
    tmp = Path(tempfile.mkdtemp(prefix="subtasks-child-"))
    try:
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("a\n")
        child = tmp / "child.json"
        child.write_text('["done nothing to do"]')

        def parent(n: int, spawn: bool) -> None:
            replies = ([f'spawn --model scripted:{child} "nothing"'] if spawn else []) + ["done"]
            script = tmp / f"p{n}{spawn}.json"
            script.write_text(__import__("json").dumps(replies))
            flow = tmp / f"p{n}{spawn}.toml"
            flow.write_text(f'[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "scripted"\n'
                            f'model = "{script}"\n[workflow.permissions]\nmode = "yes"\n')
            env = {**os.environ, "NORMALIZE_HOME": str(tmp / "home"), "CI": "true"}
            subprocess.run([sys.executable, "-m", "normalize.cli.app", "run", str(flow), "-q",
                            "--goal", "g", "-w", str(ws)], env=env, check=True,
                           capture_output=True)

        alone = median_ms(rounds, lambda n: parent(n, False))
        with_child = median_ms(rounds, lambda n: parent(n, True))
        return alone, with_child
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--venv-files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="subtasks-bench-"))
    try:
        ws = fake_workspace(tmp, args.files, args.venv_files)
        figures = measure(ws, tmp / "home", args.rounds)
        print(f"{args.files:,}-file workspace (.venv of {args.venv_files:,} files, linked): "
              f"copy {figures['copy']:.0f} ms, merge {figures['merge']:.0f} ms; copying the "
              f".venv instead {figures['venv_copy']:.0f} ms, linking it < 0.1 ms")
        clone = tmp / "repo"
        shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".venv", ".git", "*.pyc"))
        count = sum(1 for p in clone.rglob("*") if p.is_file())
        figures = measure(clone, tmp / "home2", args.rounds)
        print(f"this repository ({count:,} files): copy {figures['copy']:.0f} ms, "
              f"merge {figures['merge']:.0f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    alone, with_child = child_overhead(max(3, args.rounds // 2))
    print(f"a parent alone {alone:.0f} ms; with one trivial child {with_child:.0f} ms: "
          f"{with_child - alone:.0f} ms per child (a normalize process)")


if __name__ == "__main__":
    main()
