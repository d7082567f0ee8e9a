"""grep's speed: ripgrep alone, grep in-process (on rg and on Python's re), `normalize grep`.

    python bench/grep.py                  # zod 4.1.12 from npm (656 files, 5.7 MB of TypeScript)
    python bench/grep.py --wheels         # networkx 3.6.1 + pygments 2.21.0 wheels, ~13 MB
    python bench/grep.py --tree DIR       # any directory instead
    python bench/grep.py --before CHECKOUT --repeat 9
    python bench/grep.py --long-lines     # peak memory on one 4 MB and one 50 MB line

The default tree is zod's package fetched with `npm pack` and unpacked into a
temporary directory; `--wheels` takes two pinned wheels fetched with `pip
download` instead. Each figure is the median wall time of `--repeat` runs.
"rg alone" is the same `rg --json` command line grep runs, output read and
discarded; "in-process" is `GrepTool.run` (its JSON parsing and sorting
included); "CLI" is `normalize grep PATTERN`, the interpreter's start-up
included; `--before CHECKOUT` adds the same command run from another checkout
of normalize (its package directory first on `sys.path`), in the same run.
`--long-lines` writes a 4 MB one-line "minified bundle" and a 50 MB line of
text and runs `normalize grep "[a-z]"` on each (every character matches): the
peak resident memory of the largest process of the command (normalize or the
`rg` it starts, from `wait4`) and the wall time, beside `rg --json` alone (what
grep read before it streamed ripgrep's plain output) and `rg -c`.
Compile first (`python -m compileall -q normalize`): with
`PYTHONDONTWRITEBYTECODE=1` an uncompiled tree is compiled at every start.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from normalize.execution.cache import NoCache
from normalize.task import Action
from normalize.tools.approval import ApprovalMode, ApprovalPolicy
from normalize.tools.base import ToolContext
from normalize.tools.grep import GrepQuery, GrepTool
from normalize.tools.guard import WorkspaceGuard
from normalize.tools.ripgrep import _venvs, find_rg, rg_argv

WHEELS = ("networkx==3.6.1", "pygments==2.21.0")
WHEEL_PATTERNS = ("def ", "ZeroDivisionError", r"\w+_graph\(", r"(?i)lexer\s*=")
NPM = "zod@4.1.12"
NPM_PATTERNS = ("export ", "ZodError", r"\w+Schema\(", r"(?i)refine\s*\(")


def fetch_npm(into: Path) -> Path:
    """The pinned npm package, fetched with `npm pack` and unpacked into `into/package`."""
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm not found: install Node.js, or use --wheels or --tree DIR")
    subprocess.run([npm, "pack", "-q", NPM], cwd=into, check=True, capture_output=True)
    for archive in into.glob("*.tgz"):
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    return into / "package"


def fetch_wheels(into: Path) -> Path:
    """The pinned wheels, downloaded with pip and unpacked into `into/tree`."""
    wheels = into / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                    ":all:", "-d", str(wheels), *WHEELS], check=True)  # fmt: skip
    tree = into / "tree"
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tree / wheel.stem)
    return tree


def before_argv(checkout: Path | None) -> list[str] | None:
    """The command line running normalize from another checkout, or None."""
    if checkout is None:
        return None
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(checkout.resolve())!r}); "
            "from normalize.cli.app import main; sys.exit(main())"]


def median_time(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def time_clis(argvs: list[list[str]], tree: Path, repeat: int) -> list[float]:
    """The median time of each command line, run in turn (so load on the machine hits all)."""
    times: list[list[float]] = [[] for _ in argvs]
    for _ in range(repeat):
        for argv, got in zip(argvs, times, strict=True):
            started = time.perf_counter()
            subprocess.run(argv, cwd=tree, capture_output=True, check=False)
            got.append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def peak(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(peak RSS in MB of the largest process of the command, wall seconds)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_maxrss / 1024, time.perf_counter() - started


def long_lines(rg: str, before: list[str] | None) -> None:
    """Peak memory of `normalize grep` on one very long line, beside ripgrep alone."""
    normalize = [str(Path(sys.executable).parent / "normalize")]
    pieces = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789(){};=.,+ "
    pick = random.Random(7).choices
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch)
        sizes = {"bundle.min.js": 4_000_000, "line50.txt": 50_000_000}
        for name, size in sizes.items():
            block = "".join(pick(pieces, k=1 << 20))
            with open(tree / name, "w") as out:
                for _ in range(size // len(block)):
                    out.write(block)
                out.write(block[: size % len(block)] + "\n")
        columns = {"normalize grep": [*normalize, "grep", "[a-z]"],
                   **({"before": [*before, "grep", "[a-z]"]} if before else {}),
                   "rg --json": [rg, "--json", "[a-z]"], "rg -c": [rg, "-c", "[a-z]"]}
        print(f"{'file':<16}" + "".join(f"{name:>22}" for name in columns))
        for name in sizes:
            cells = [peak([*argv, name], tree) for argv in columns.values()]
            print(f"{name:<16}" + "".join(f"{mb:>10.0f} MB {secs:>6.2f} s " for mb, secs in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path)
    parser.add_argument("--wheels", action="store_true",
                        help="the pinned wheels (and Python patterns), not zod")
    parser.add_argument("--before", type=Path, help="a checkout of normalize to time beside")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--long-lines", action="store_true",
                        help="peak memory on a 4 MB and a 50 MB single-line file")
    args = parser.parse_args()
    rg = find_rg()
    if rg is None:
        sys.exit("rg not found: pip install ripgrep")
    if args.long_lines:
        return long_lines(rg, before_argv(args.before))
    with tempfile.TemporaryDirectory() as scratch:
        fetch = fetch_wheels if args.wheels else fetch_npm
        tree = (args.tree or fetch(Path(scratch))).resolve()
        files = [p for p in tree.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        name = tree.name if args.tree else " + ".join(WHEELS) if args.wheels else NPM
        print(f"tree: {name}: {len(files):,} files, {size / 1e6:.1f} MB; "
              f"median of {args.repeat} runs")
        ctx = ToolContext(workspace=tree, guard=WorkspaceGuard(tree),
                          cache=NoCache(preview_lines=10**9, preview_chars=10**9),
                          policy=ApprovalPolicy(mode=ApprovalMode.NEVER))  # fmt: skip
        normalize = [str(Path(sys.executable).parent / "normalize")]
        before = before_argv(args.before)
        print(f"{'pattern':<22}{'matches':>9}{'rg alone':>10}{'in-proc':>10}{'ratio':>7}"
              f"{'python re':>11}{'CLI':>8}" + (f"{'before':>9}" if before else ""))
        patterns = WHEEL_PATTERNS if args.wheels else NPM_PATTERNS
        for pattern in patterns:
            argv = rg_argv(rg, GrepQuery(pattern), ".", _venvs(tree))
            alone = median_time(lambda argv=argv: subprocess.run(
                argv, cwd=tree, capture_output=True, check=False), args.repeat)  # fmt: skip
            action = Action("grep", {"args": [pattern]}, text=f"grep {pattern}")
            tool, slow = GrepTool(engine="rg"), GrepTool(engine="python")
            matches = tool.run(action, ctx).data["matches"]
            inproc = median_time(lambda t=tool, a=action: t.run(a, ctx), args.repeat)
            python = median_time(lambda t=slow, a=action: t.run(a, ctx), max(1, args.repeat // 2))
            cli, *earlier = time_clis([[*normalize, "grep", pattern]]
                                      + ([[*before, "grep", pattern]] if before else []),
                                      tree, args.repeat)
            old = "".join(f"{t:>8.3f}s" for t in earlier)
            print(f"{pattern:<22}{matches:>9,}{alone:>9.3f}s{inproc:>9.3f}s{inproc / alone:>6.1f}×"
                  f"{python:>10.3f}s{cli:>7.3f}s{old}")


if __name__ == "__main__":
    main()
