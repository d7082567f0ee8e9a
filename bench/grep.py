"""grep's speed: ripgrep alone, grep in-process (on rg and on Python's re), `normalize grep`.

    python bench/grep.py                  # networkx 3.6.1 + pygments 2.21.0 wheels, ~13 MB
    python bench/grep.py --tree DIR       # any directory instead
    python bench/grep.py --repeat 9

The default tree is two pinned wheels fetched with `pip download` and
unpacked into a temporary directory (about 950 files, 13 MB of Python). Each
figure is the median wall time of `--repeat` runs. "rg alone" is the same
`rg --json` command line grep runs, output read and discarded; "in-process"
is `GrepTool.run` (its JSON parsing and sorting included); the command line
includes the interpreter's start-up.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
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
PATTERNS = ("def ", "ZeroDivisionError", r"\w+_graph\(", r"(?i)lexer\s*=")


def fetch_tree(into: Path) -> Path:
    """The pinned wheels, downloaded with pip and unpacked into `into/tree`."""
    wheels = into / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                    ":all:", "-d", str(wheels), *WHEELS], check=True)  # fmt: skip
    tree = into / "tree"
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tree / wheel.stem)
    return tree


def median_time(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rg = find_rg()
    if rg is None:
        sys.exit("rg not found: pip install ripgrep")
    with tempfile.TemporaryDirectory() as scratch:
        tree = (args.tree or fetch_tree(Path(scratch))).resolve()
        files = [p for p in tree.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        print(f"tree: {tree.name if args.tree else ' + '.join(WHEELS)}: {len(files):,} files, "
              f"{size / 1e6:.1f} MB; median of {args.repeat} runs")
        ctx = ToolContext(workspace=tree, guard=WorkspaceGuard(tree),
                          cache=NoCache(preview_lines=10**9, preview_chars=10**9),
                          policy=ApprovalPolicy(mode=ApprovalMode.NEVER))  # fmt: skip
        normalize = Path(sys.executable).parent / "normalize"
        print(f"{'pattern':<22}{'matches':>9}{'rg alone':>10}{'in-proc':>10}{'ratio':>7}"
              f"{'python re':>11}{'CLI':>8}")
        for pattern in PATTERNS:
            argv = rg_argv(rg, GrepQuery(pattern), ".", _venvs(tree))
            alone = median_time(lambda argv=argv: subprocess.run(
                argv, cwd=tree, capture_output=True, check=False), args.repeat)  # fmt: skip
            action = Action("grep", {"args": [pattern]}, text=f"grep {pattern}")
            tool, slow = GrepTool(engine="rg"), GrepTool(engine="python")
            matches = tool.run(action, ctx).data["matches"]
            inproc = median_time(lambda t=tool, a=action: t.run(a, ctx), args.repeat)
            python = median_time(lambda t=slow, a=action: t.run(a, ctx), max(1, args.repeat // 2))
            cli = median_time(lambda p=pattern: subprocess.run(
                [str(normalize), "grep", p], cwd=tree, capture_output=True, check=False),
                args.repeat)  # fmt: skip
            print(f"{pattern:<22}{matches:>9,}{alone:>9.3f}s{inproc:>9.3f}s{inproc / alone:>6.1f}×"
                  f"{python:>10.3f}s{cli:>7.3f}s")


if __name__ == "__main__":
    main()
