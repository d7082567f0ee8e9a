"""The benchmark suite: one table, each row with its target and whether it is met.

    .venv/bin/python bench/run.py               # everything (a few minutes)
    .venv/bin/python bench/run.py --quick       # fewer runs and steps, for a look

Rows: start-up (`normalize --help` and a completion request beside
`python -c "import typer"`), engine overhead per no-op step on a 10,000-step
workflow with and without fsync, checkpoint cost at step 10,000 against step
100, `normalize resume` of a 10,000-step task, `normalize agent` launch to
its first request at a local fake server (bytecode compiled first; target
1.0 s; the OpenAI path, the SDK's bare import and `claude -p` when on PATH
beside it), the 30-step review story (bench/tokens.py), the fan-out ratio
(bench/parallel.py), no-op durable steps beside LangGraph when it is
installed (bench/compare.py), a `for_each` over 10,000 items, a 10,000-step
TOML load and `tasks show`'s memory (bench/loops.py), and listing a store of
10,000 tasks (bench/listing.py). A row whose helper is missing says "not available".
Timings are medians; the machine's load moves them, so run it on a quiet one.
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
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))



@dataclass
class Row:
    name: str
    figure: str
    target: str
    met: bool | None  # None: no target, or not measured

    @property
    def verdict(self) -> str:
        return "—" if self.met is None else "met" if self.met else "MISSED"


def startup_rows(runs: int) -> list[Row]:
    import startup

    medians = startup.measure(runs)
    base = medians["import typer"]
    rows = [Row("python -c 'import typer'", f"{base * 1000:.0f} ms", "(baseline)", None)]
    for name in ("normalize --help", "completion request"):
        ratio = medians[name] / base
        rows.append(Row(f"{name} (÷ import typer)",
                        f"{ratio:.2f}× ({medians[name] * 1000:.0f} ms)", "≤ 1.5×", ratio <= 1.5))
    return rows


def engine_rows(steps: int) -> list[Row]:
    import engine

    rows = []
    for fsync in (False, True):
        figures, _ = engine.run_steps(steps, fsync=fsync)
        label = "with fsync" if fsync else "no fsync"
        if figures.status != "done":
            raise RuntimeError(f"the {steps}-step workflow ended {figures.status}")
        rows.append(Row(f"engine overhead per no-op step, {steps:,} steps, {label}",
                        f"{figures.per_step_ms:.2f} ms",
                        "≤ 0.30 ms" if not fsync else "≤ 0.65 ms",
                        figures.per_step_ms <= (0.65 if fsync else 0.30)))
        ratio = figures.save_late_ms / figures.save_early_ms
        rows.append(Row(f"checkpoint at step {steps:,} ÷ at step 100, {label}",
                        f"{ratio:.2f}× ({figures.save_late_ms:.2f} / "
                        f"{figures.save_early_ms:.2f} ms, task file {figures.task_bytes:,} B)",
                        "≤ 1.2×", ratio <= 1.2))
    return rows


def resume_rows(steps: int) -> list[Row]:
    """Resume of a long task, beside the same resume of a 10-step task (the start-up alone)."""
    import engine

    short = engine.time_resume(10)["seconds"]
    result = engine.time_resume(steps)
    seconds = result["seconds"]
    return [Row(f"normalize resume of a {steps:,}-step task, to its first action",
                f"{seconds:.3f} s; a 10-step task {short:.3f} s (task file "
                f"{result['task_bytes']:,} B, journal {result['journal_bytes'] / 1e6:.1f} MB)",
                "≤ 0.2 s", seconds <= 0.2)]


def durable_rows(steps: int, rounds: int) -> list[Row]:
    """No-op durable steps beside LangGraph's `durability="sync"` (bench/compare.py)."""
    import compare

    f = compare.interleaved(steps, rounds)
    rows = []
    for label, cap in (("no fsync", 0.30), ("fsync", 0.65)):
        ours = f[f"normalize {label}"]
        theirs = f.get(f"langgraph {label}")
        versus = f"; LangGraph {theirs:.2f} ms" if theirs is not None else \
            "; LangGraph not installed"
        versus += f"; floor (the bare writes) {f[f'floor {label}']:.2f} ms"
        met = ours <= cap and (theirs is None or ours < theirs)
        rows.append(Row(f"no-op durable step, {label} (beside LangGraph)",
                        f"{ours:.2f} ms{versus}", f"≤ {cap} ms and < LangGraph", met))
    return rows


def loop_rows(items: int, rounds: int) -> list[Row]:
    """A `for_each` over N items beside N plain steps; a long TOML workflow (bench/loops.py)."""
    import loops

    f = loops.main_figures(items, rounds)
    each, steps = f["normalize for_each"], f["normalize steps"]
    ratio = each["ms"] / steps["ms"]
    growth = each["bytes_n"] / max(1, each["bytes_100"])
    return [
        Row(f"for_each over {items:,} items, per step ÷ plain steps",
            f"{ratio:.2f}× ({each['ms']:.2f} / {steps['ms']:.2f} ms)", "≤ 1.2×", ratio <= 1.2),
        Row(f"for_each checkpoint at item {items:,} ÷ at item 100",
            f"{growth:.2f}× ({each['bytes_n']:,} / {each['bytes_100']:,} B)", "≤ 1.2×",
            growth <= 1.2),
        Row(f"load a {items:,}-step TOML workflow", f"{f['normalize toml']['s']:.2f} s",
            "≤ 0.3 s", f["normalize toml"]["s"] <= 0.3),
        Row(f"`tasks show` of a {items:,}-step task, peak memory",
            f"{f['normalize tasks show MB']:.0f} MB", "< 60 MB",
            f["normalize tasks show MB"] < 60),
    ]


def listing_rows(tasks: int, rounds: int) -> list[Row]:
    """`normalize tasks` and `resume last` with 10 and N tasks (bench/listing.py)."""
    import listing

    f = listing.measure((10, tasks), rounds, None)
    rows = []
    for command, cap in (("tasks", 0.150), ("resume last", 0.250)):
        big, small = f[f"normalize {command} {tasks}"], f[f"normalize {command} 10"]
        ratio = big / small
        rows.append(Row(f"`normalize {command}` with {tasks:,} tasks (÷ 10 tasks)",
                        f"{big * 1000:.0f} ms ({ratio:.2f}×)", f"≤ {cap * 1000:.0f} ms, ≤ 1.5×",
                        big <= cap and ratio <= 1.5))
    return rows


def _median_run(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


FIRST_REQUEST_TARGET = 1.0  # seconds from launch to the first request at a local server


def compiled_env(cache: Path) -> dict[str, str]:
    """The environment with bytecode compiled into `cache` and written there (a real install
    has its .pyc files; PYTHONDONTWRITEBYTECODE would make every launch compile from source)."""
    import site
    import sysconfig

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    roots = [sysconfig.get_path("stdlib"), *site.getsitepackages(), str(HERE.parent / "normalize")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", *roots], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return env


def first_request(argv: list[str], env: dict[str, str], work: Path, *,
                  openai: bool = False) -> float:
    """Seconds from starting `argv` to the first request at a fresh local fake server."""
    from normalize.testing.servers import FakeModelServer, Reply

    with FakeModelServer([Reply("done nothing to do")]) as server:
        url = {"OPENAI_BASE_URL": server.openai_url} if openai else {
            "ANTHROPIC_BASE_URL": server.url}
        start = time.perf_counter()
        done = subprocess.run(argv, env={**env, **url}, cwd=work, capture_output=True,
                              text=True, check=False, timeout=120)
        if server.first_request_at is None:
            raise RuntimeError(f"no request reached the fake server: {done.stderr[-300:]}")
        return server.first_request_at - start


def agent_rows(runs: int) -> list[Row]:
    """`normalize agent` start to its first request at a fake server, beside its peers."""
    import shutil

    script = Path(sys.executable).parent / "normalize"
    if not script.exists():
        return [Row("normalize agent: start to first request", "not available",
                    f"≤ {FIRST_REQUEST_TARGET} s", None)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="nbench-") as tmp:
        env = compiled_env(Path(tmp) / "pycache")
        env.update(ANTHROPIC_API_KEY="sk-ant-bench", OPENAI_API_KEY="sk-bench")
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        sdk = _median_run([sys.executable, "-c", "import anthropic"], runs, env)
        agent = [str(script), "agent", "say done", "--json", "--max-turns", "2"]
        figures: dict[str, list[float]] = {"anthropic": [], "openai": [], "claude": []}
        claude = shutil.which("claude")
        for i in range(runs):  # interleaved, so a slow moment of the machine hits all alike
            run_env = {**env, "NORMALIZE_HOME": str(Path(tmp) / f"home{i}")}
            figures["anthropic"].append(first_request(
                [*agent, "--model", "anthropic:claude-sonnet-4-5"], run_env, work))
            figures["openai"].append(first_request(
                [*agent, "--model", "openai:gpt-4.1-mini"], run_env, work, openai=True))
            if claude:
                figures["claude"].append(first_request(
                    [claude, "-p", "say done", "--model", "claude-sonnet-4-5"], run_env, work))
    first = statistics.median(figures["anthropic"])
    rows.append(Row("python -c 'import anthropic' (the SDK's bare import, for reference)",
                    f"{sdk:.3f} s", "(reference)", None))
    rows.append(Row("normalize agent (anthropic): launch to first request at the server",
                    f"{first:.3f} s", f"≤ {FIRST_REQUEST_TARGET} s", first <= FIRST_REQUEST_TARGET))
    rows.append(Row("normalize agent (openai path): launch to first request",
                    f"{statistics.median(figures['openai']):.3f} s", "(reference)", None))
    if figures["claude"]:
        peer = statistics.median(figures["claude"])
        rows.append(Row("claude -p (Claude Code): launch to first request", f"{peer:.3f} s",
                        "normalize no slower", first <= peer))
    else:
        rows.append(Row("claude -p (Claude Code): launch to first request",
                        "not measured: `claude` is not on PATH", "normalize no slower", None))
    return rows


def token_rows() -> list[Row]:
    """The 30-step review story (bench/tokens.py) per context strategy, with its targets."""
    try:
        import tokens
    except ImportError:
        return [Row("prompt tokens (bench/tokens.py)", "not available", "", None)]
    rows = []
    for row in tokens.review_table():
        name = row["strategy"]
        figure = (f"{row['requests']} requests; {row['first']:,} → {row['last']:,} per turn "
                  f"({row['growth']:.2f}×, largest {row['max']:,}), total {row['total']:,}, "
                  f"cached {row['cache_read']:,}, ${row['cost_usd']:.3f}")
        label = f"30-step review of a real package, {name}"
        if name == "task_tree":
            met = row["requests"] <= 31 and row["total"] <= 80_000 and row["growth"] <= 1.5
            rows.append(Row(label, figure, "requests ≤ 31; total ≤ 80,000; last ≤ 1.5× first",
                            met))
        else:
            rows.append(Row(label, figure, "requests ≤ 31", row["requests"] <= 31))
    peers = ", ".join(f"{n} {t:,}" for n, t in tokens.PEERS.items())
    rows.append(Row("the same story, peers' total prompt tokens (issue 13)", peers,
                    "(reference)", None))
    return rows


def parallel_rows() -> list[Row]:
    try:
        import parallel
    except ImportError:
        return [Row("parallel fan-out ratio (bench/parallel.py)", "not available", "", None)]
    figures: dict[str, Any] = parallel.parallel_ratio()
    return [Row(f"parallel = true, {figures['steps']} steps of {figures['sleep_s']:g} s",
                f"{figures['ratio']:.1f}× ({figures['sequential_s']:.2f} s → "
                f"{figures['parallel_s']:.2f} s)", "≥ 4×", figures["ratio"] >= 4)]


def table(rows: list[Row]) -> str:
    out = ["| measure | figure | target | |", "|---|---|---|---|"]
    out += [f"| {r.name} | {r.figure} | {r.target} | {r.verdict} |" for r in rows]
    return "\n".join(out)


def _guarded(name: str, make: Callable[[], list[Row]]) -> list[Row]:
    try:
        return make()
    except Exception as exc:  # one broken row must not hide the others
        traceback.print_exc(file=sys.stderr)
        return [Row(name, f"failed: {type(exc).__name__}: {exc}", "", False)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and steps")
    parser.add_argument("--steps", type=int, default=None, help="steps of the no-op workflow")
    parser.add_argument("--json", action="store_true", help="the rows as JSON")
    args = parser.parse_args(argv)
    steps = args.steps or (2_000 if args.quick else 10_000)
    runs = 7 if args.quick else 21
    rows: list[Row] = []
    sections: list[tuple[str, Callable[[], list[Row]]]] = [
        ("start-up", lambda: startup_rows(runs)),
        ("engine", lambda: engine_rows(steps)),
        ("resume", lambda: resume_rows(steps)),
        ("durable steps", lambda: durable_rows(steps // 3, 3 if args.quick else 5)),
        ("loops", lambda: loop_rows(steps, 1 if args.quick else 3)),
        ("listing", lambda: listing_rows(steps, 2 if args.quick else 5)),
        ("agent", lambda: agent_rows(3 if args.quick else 7)),
        ("tokens", token_rows),
        ("parallel", parallel_rows),
    ]
    for name, make in sections:
        print(f"… {name}", file=sys.stderr, flush=True)
        rows += _guarded(name, make)
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        print(table(rows))
    return 0 if all(r.met is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
