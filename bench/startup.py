"""Start-up times: `normalize --help` and a completion request, beside `python -c "import typer"`.

    python bench/startup.py            # the medians and ratios
    python bench/startup.py --runs 30

Each command runs as a fresh process; the three are interleaved run by run so
that a slow moment of the machine hits them alike, and the median is taken.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def compile_tree(tree: Path = ROOT) -> None:
    """Compile `tree/normalize` to bytecode, as an installed package ships it.

    This machine sets PYTHONDONTWRITEBYTECODE, so without this every timed
    start-up would recompile every module it imports.
    """
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(Path(tree) / "normalize")],
                   check=True)


def normalize_command() -> list[str]:
    """The installed `normalize` script next to this Python, else `python -m`."""
    script = Path(PYTHON).parent / "normalize"
    if script.exists():
        return [str(script)]
    return [PYTHON, "-m", "normalize.cli.app"]


def commands(home: Path) -> dict[str, tuple[list[str], Mapping[str, str]]]:
    """name → (argv, extra environment) of each measured command."""
    base = {"NORMALIZE_HOME": str(home)}
    return {
        "import typer": ([PYTHON, "-c", "import typer"], base),
        "normalize --help": ([*normalize_command(), "--help"], base),
        "completion request": (normalize_command(), {
            **base, "_NORMALIZE_COMPLETE": "complete_bash",
            "COMP_WORDS": "normalize resume ", "COMP_CWORD": "2"}),
    }


def _time(argv: list[str], extra: Mapping[str, str]) -> float:
    env = {**os.environ, **extra}
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def measure(runs: int = 21, warmup: int = 2) -> dict[str, float]:
    """Median wall time (seconds) of each command, interleaved (bytecode compiled first)."""
    compile_tree()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "tasks").mkdir()
        for task_id in ("0a1b2c3d", "4e5f6a7b"):  # something for the completion to list
            (home / "tasks" / f"{task_id}.json").write_text("{}")
        cmds = commands(home)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for i in range(warmup + runs):
            for name, (argv, extra) in cmds.items():
                elapsed = _time(argv, extra)
                if i >= warmup:
                    times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


def startup_rows(runs: int = 21) -> list[dict[str, object]]:
    """Rows for bench/run.py: each command's median and its ratio to `import typer`."""
    medians = measure(runs)
    base = medians["import typer"]
    return [{"name": name, "seconds": value, "ratio": value / base}
            for name, value in medians.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    for row in startup_rows(args.runs):
        print(f"{row['name']:<20} {float(row['seconds']) * 1000:7.1f} ms  "  # type: ignore[arg-type]
              f"{float(row['ratio']):.2f}×")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
