"""Cost that does not grow with the work (issue #30): every target, met or missed, in one run.

    .venv/bin/python bench/cost.py                  # everything (several minutes)
    .venv/bin/python bench/cost.py --quick          # fewer rounds, smaller trees
    .venv/bin/python bench/cost.py --codex PATH     # the `codex` to start beside --help
    .venv/bin/python bench/cost.py --install-codex  # npm-install @openai/codex into a temp prefix

Each row's contenders run interleaved (A B A B …) in the same run, so a slow
moment of the machine hits them alike; figures are medians (wall time; the
command-line rows also give CPU time, steadier on a shared machine):

- loops: a `for_each` over a `[workflow.vars]` list of 100, 10,000 and (its
  first 10,000 items) 1,000,000 items, in process, fsync off: ms per step
  once running, and the checkpoint record's bytes at item 100 and at the last;
- grep: `normalize grep -F NOTHERE` beside `rg -n -F NOTHERE .` and
  `normalize --help` on a copy of this interpreter's site-packages (or
  `--tree`); in process, `GrepTool.run` beside the same `rg`;
- a durable no-op step from the command line (`normalize run -q` of N steps
  less a 10-step run, over N - 10) beside the floor: the bare writes of a
  step (bench/compare.py `floor_steps`: five journal lines, a record and its
  fdatasync) on the same disk;
- start-up: `normalize tasks` (10 tasks, and 3,000 laid out as bench/listing.py lays
  them: its index sealed, as it is once `tasks/` has settled), `normalize resume last` (a task
  waiting for an answer: it loads, resumes and waits again) and `normalize run`
  (a new task of one no-op step) beside `--help`,
  and `--help` beside `codex --version` when Codex is found;
- checkpoints: a step that writes one file in a git repository of `--files`
  files (default 100,000): its `checkpoint_taken` milliseconds beside
  `git status --porcelain` of the same tree.
Compile first: this machine sets PYTHONDONTWRITEBYTECODE (done here).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable
sys.path.insert(0, str(HERE))

Row = tuple[str, str, str, bool | None]  # name, figure, target, met


def normalize_argv() -> list[str]:
    script = Path(PYTHON).parent / "normalize"
    return [str(script)] if script.exists() else [PYTHON, "-m", "normalize.cli.app"]


def run_timed(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall, cpu, first) seconds of one run of `argv` to its end: `first` is when its first
    line of output arrived (a `--json` run's first event: the run has started), else wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        first = time.perf_counter() - start
        proc.stdout.read()
        proc.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), \
        first if line else wall


def interleaved(commands: dict[str, Sequence[str]], cwd: Path, env: dict[str, str],
                runs: int, warmup: int = 1) -> dict[str, tuple[float, float, float]]:
    """name → (median wall, median cpu, median first line) seconds, the commands in turn."""
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for i in range(warmup + runs):
        for name, argv in commands.items():
            timed = run_timed(argv, cwd, env)
            if i >= warmup:
                got[name].append(timed)
    return {name: (statistics.median(t[0] for t in got[name]),
                   statistics.median(t[1] for t in got[name]),
                   statistics.median(t[2] for t in got[name])) for name in commands}


# -- loops ---------------------------------------------------------------------


def var_loop(count: int, limit: int) -> dict[str, float]:
    """A `for_each` over a `count`-item variable, its first `limit` items: ms/step, bytes."""
    from normalize.runner import RunOptions, run_task, start_task
    from normalize.store import TaskStore
    from normalize.task import Limits
    from normalize.workflow.spec import StepSpec, WorkflowSpec

    spec = WorkflowSpec(name="loop", path="<bench>", driver="workflow",
                        vars={"items": [f"item-{i:07d}" for i in range(count)]},
                        steps=[StepSpec(name="each", for_each="items", as_="x",
                                        action="note --turns 1 at {x}")])
    done, at, sizes = [0], {}, {}

    def watch(event: Any) -> None:
        if event.type == "action_finished":
            done[0] += 1
            if done[0] in (10, limit):
                at[done[0]] = time.perf_counter()
        elif event.type == "checkpoint_saved" and done[0] in (100, limit):
            sizes.setdefault(done[0], event.bytes)

    with tempfile.TemporaryDirectory(prefix="ncost-") as tmp:
        options = RunOptions(workspace=Path(tmp), store=TaskStore(Path(tmp) / "home",
                                                                  fsync=False),
                             fsync=False, subscribers=[watch])
        task = start_task(spec, "loop", options,
                          limits=Limits(max_turns=limit if limit < count else None))
        run_task(task, options)
    return {"ms": (at[limit] - at[10]) / (limit - 10) * 1000,
            "bytes_100": sizes.get(100, 0), "bytes_n": sizes.get(limit, 0)}


def loop_rows(rounds: int, million: int) -> list[Row]:
    cases = {"100": (100, 100), "10,000": (10_000, 10_000),
             f"{million:,} (first 10,000)": (million, 10_000)}
    got: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (count, limit) in cases.items():
            out = subprocess.run([PYTHON, __file__, "--one-loop", str(count), str(limit)],
                                 capture_output=True, text=True, check=True, cwd=ROOT)
            got[name].append(json.loads(out.stdout))
    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
           for name, runs in got.items()}
    small, big, huge = (med[name] for name in cases)
    per_step = big["ms"] / small["ms"]
    growth = big["bytes_n"] / big["bytes_100"]
    rate = big["ms"] / huge["ms"]
    return [
        ("for_each over a 10,000-item variable: ms/step ÷ 100 items",
         f"{per_step:.2f}× ({big['ms']:.3f} / {small['ms']:.3f} ms)", "≤ 1.2×", per_step <= 1.2),
        ("checkpoint record at item 10,000 ÷ at item 100",
         f"{growth:.2f}× ({big['bytes_n']:,.0f} / {big['bytes_100']:,.0f} B)", "≤ 1.2×",
         growth <= 1.2),
        (f"{million:,} items: per-item rate ÷ 10,000 items'",
         f"{rate:.2f}× ({huge['ms']:.3f} / {big['ms']:.3f} ms a step)", "≥ 0.8×", rate >= 0.8),
    ]


# -- grep ----------------------------------------------------------------------


def make_tree(into: Path) -> Path:
    """A large tree: a copy of this interpreter's site-packages."""
    tree = into / "site-packages"
    shutil.copytree(sysconfig.get_paths()["purelib"], tree, symlinks=True)
    return tree


def grep_rows(tree: Path, runs: int) -> list[Row]:
    from normalize.tools.ripgrep import find_rg

    rg = find_rg()
    if rg is None:
        return [("grep", "rg not found (pip install ripgrep)", "", None)]
    env = dict(os.environ)
    cli = interleaved({"grep": [*normalize_argv(), "grep", "-F", "NOTHERE"],
                       "rg": [rg, "-n", "-F", "NOTHERE", "."],
                       "help": [*normalize_argv(), "--help"]}, tree, env, runs)
    bound = 1.3 * cli["rg"][0] + cli["help"][0]
    inproc = json.loads(subprocess.run([PYTHON, __file__, "--one-grep", str(tree), str(runs)],
                                       capture_output=True, text=True, check=True).stdout)
    ratio = inproc["tool"] / inproc["rg"]
    return [
        ("`normalize grep` (command line) ÷ (1.3 × rg + start-up)",
         f"{cli['grep'][0] / bound:.2f}× ({cli['grep'][0] * 1000:.0f} ms; rg "
         f"{cli['rg'][0] * 1000:.0f}, --help {cli['help'][0] * 1000:.0f}; CPU "
         f"{cli['grep'][1] * 1000:.0f} / {cli['rg'][1] * 1000:.0f} / "
         f"{cli['help'][1] * 1000:.0f})", "≤ 1.0×", cli["grep"][0] <= bound),
        ("`grep` in process ÷ rg", f"{ratio:.2f}× ({inproc['tool'] * 1000:.0f} / "
         f"{inproc['rg'] * 1000:.0f} ms)", "≤ 1.3×", ratio <= 1.3),
    ]


def one_grep(tree: Path, runs: int) -> dict[str, float]:
    """GrepTool.run and the plain rg, interleaved in this process: median seconds."""
    from normalize.execution.cache import NoCache
    from normalize.task import Action
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy
    from normalize.tools.base import ToolContext
    from normalize.tools.grep import GrepTool
    from normalize.tools.guard import WorkspaceGuard
    from normalize.tools.ripgrep import find_rg

    ctx = ToolContext(workspace=tree, guard=WorkspaceGuard(tree),
                      cache=NoCache(preview_lines=10**9, preview_chars=10**9),
                      policy=ApprovalPolicy(mode=ApprovalMode.NEVER))
    action = Action("grep", {"args": ["-F", "NOTHERE"]}, text="grep -F NOTHERE")
    tool, rg = GrepTool(engine="rg"), find_rg()
    assert rg is not None
    ways: dict[str, Callable[[], object]] = {
        "tool": lambda: tool.run(action, ctx),
        "rg": lambda: subprocess.run([rg, "-n", "-F", "NOTHERE", "."], cwd=tree,
                                     capture_output=True, check=False)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(runs + 1):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            if i:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


# -- the durable step and start-up ---------------------------------------------------


def workflow(path: Path, steps: int, ask: bool = False) -> Path:
    parts = [f'[workflow]\nname = "{path.stem}"\n']
    parts += [f'[[workflow.steps]]\nname = "s{i}"\naction = "note --turns 1 step {i}"\n'
              for i in range(steps)]
    if ask:
        parts.append('[[workflow.steps]]\nname = "ask"\naction = "ask Go on?"\n')
    path.write_text("\n".join(parts))
    return path


def step_rows(work: Path, steps: int, runs: int, baseline: Path | None = None) -> list[Row]:
    """The command-line step beside the floor; with `baseline`, that tree's step too, each
    run of it interleaved with this tree's (one launcher for both, `python -c`)."""
    from compare import floor_steps

    home = work / "steps-home"
    env = {**os.environ, "NORMALIZE_HOME": str(home)}
    long, short = workflow(work / "long.toml", steps), workflow(work / "short.toml", 10)
    trees = {"after": ROOT, **({"before": baseline} if baseline else {})}
    walls: dict[str, list[float]] = {"floor": []}
    cpus: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, tree in trees.items():
            launch = normalize_argv() if baseline is None else [PYTHON, "-c", LAUNCH]
            tree_env = env if baseline is None else {**env, "PYTHONPATH": str(tree)}
            for size, flow in (("long", long), ("short", short)):
                wall, cpu, _ = run_timed([*launch, "run", str(flow), "-q"], work, tree_env)
                walls.setdefault(f"{name} {size}", []).append(wall)
                cpus.setdefault(f"{name} {size}", []).append(cpu)
        walls["floor"].append(floor_steps(steps, fsync=True) / 1000 * steps)
    floor = statistics.median(walls["floor"]) / steps * 1000
    rows: list[Row] = []
    for name in trees:
        long_s, short_s = (statistics.median(walls[f"{name} {k}"]) for k in ("long", "short"))
        step = (long_s - short_s) / (steps - 10) * 1000
        cpu_long, cpu_short = (statistics.median(cpus[f"{name} {k}"]) for k in ("long", "short"))
        cpu = (cpu_long - cpu_short) / (steps - 10) * 1000  # the process's own, not the disk's
        label = "durable no-op step from the command line ÷ the floor"
        rows.append((label if baseline is None else f"{label} ({name})",
                     f"{step / floor:.2f}× ({step:.2f} / {floor:.2f} ms; CPU {cpu:.2f} ms a step)",
                     "≤ 1.5×", step / floor <= 1.5))
    return rows


def project(work: Path) -> Path:
    """A small project to start in (the data homes and the other rows' trees are beside it,
    not in it: a run reads its workspace's `.env*` files, and that walk is the project's)."""
    root = work / "project"
    if not root.exists():
        (root / "src").mkdir(parents=True)
        (root / "README.md").write_text("# app\n")
        (root / "src" / "app.py").write_text("def main() -> None:\n    print('hi')\n")
    return root


def startup_home(work: Path) -> dict[str, str]:
    """The environment of a data home with ten done tasks and one waiting (made once)."""
    home = work / "startup-home"
    env = {**os.environ, "NORMALIZE_HOME": str(home)}
    if home.exists():
        return env
    tiny, asks = workflow(work / "tiny.toml", 1), workflow(work / "asks.toml", 1, ask=True)
    for _ in range(10):
        subprocess.run([*normalize_argv(), "run", str(tiny), "-q"], cwd=project(work), env=env,
                       capture_output=True, check=True)
    subprocess.run([*normalize_argv(), "run", str(asks), "-q"], cwd=project(work), env=env,
                   capture_output=True, check=False)  # waits for its answer: exit 4
    return env


def many_tasks_home(work: Path, count: int) -> Path:
    """A data home of `count` done tasks (made once, as bench/listing.py makes them)."""
    from listing import make_store

    home = work / f"tasks-{count}-home"
    if not home.exists():
        make_store(home, count)
    return home


def startup_rows(work: Path, runs: int, codex: str | None) -> list[Row]:
    env = startup_home(work)
    many = many_tasks_home(work, 3000)
    commands: dict[str, Sequence[str]] = {
        "help": [*normalize_argv(), "--help"], "tasks": [*normalize_argv(), "tasks"],
        "tasks 3,000": ["env", f"NORMALIZE_HOME={many}", *normalize_argv(), "tasks"],
        # `--json`: the first event (`run_started`) says when the run has started
        "resume": [*normalize_argv(), "resume", "last", "--json"],
        # a data home of its own, so the listing keeps its ten tasks (`env` costs ~1 ms)
        "run": ["env", f"NORMALIZE_HOME={work / 'run-home'}", *normalize_argv(), "run",
                str(work / "tiny.toml"), "--json"]}
    if codex:
        commands["codex"] = [codex, "--version"]
    got = interleaved(commands, project(work), env, runs)
    help_ms = got["help"][0] * 1000
    rows: list[Row] = []
    for name, label, started in (
            ("tasks", "`normalize tasks` (10 tasks)", False),
            ("tasks 3,000", "`normalize tasks` (3,000 tasks)", False),
            ("resume", "`normalize resume last` (a waiting task) until its run has started", True),
            ("run", "`normalize run` (a new task of one no-op step) until its run has started",
             True)):
        wall, cpu, first = (figure * 1000 for figure in got[name])
        at = first if started else wall
        whole = f"; to its end {wall:.0f} ms" if started else ""
        rows.append((f"{label} − `--help`", f"{at - help_ms:+.0f} ms ({at:.0f} / {help_ms:.0f} "
                     f"ms{whole}; CPU {cpu:.0f} / {got['help'][1] * 1000:.0f})", "≤ +30 ms",
                     at - help_ms <= 30))
    if codex:
        ratio = got["help"][0] / got["codex"][0]
        rows.append(("`normalize --help` ÷ `codex --version`",
                     f"{ratio:.2f}× ({help_ms:.0f} / {got['codex'][0] * 1000:.0f} ms)",
                     "≤ 1.1×", ratio <= 1.1))
    else:
        rows.append(("`normalize --help` ÷ `codex --version`", "codex not found "
                     "(--codex PATH or --install-codex)", "≤ 1.1×", None))
    return rows


LAUNCH = "import sys; from normalize.cli.entry import main; sys.exit(main())"


def startup_versus(work: Path, runs: int, baseline: Path) -> list[Row]:
    """`--help`, `tasks`, `resume last` and `run` of this tree beside `baseline`'s (a copy of
    another version's source: `git archive main | tar -x -C DIR`), interleaved, one launcher."""
    home_env = startup_home(work)
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(baseline / "normalize")], check=True)
    from normalize.store import TaskStore

    waiting = TaskStore(Path(home_env["NORMALIZE_HOME"])).resolve("last")  # (runs come after)
    verbs = {"--help": ["--help"], "tasks": ["tasks"], "resume (waiting)": ["resume", waiting],
             "run (1 step)": ["run", str(work / "tiny.toml"), "-q"]}
    trees = {"before": baseline, "after": ROOT}
    walls: dict[tuple[str, str], list[float]] = {(t, v): [] for t in trees for v in verbs}
    cpus: dict[tuple[str, str], list[float]] = {(t, v): [] for t in trees for v in verbs}
    for i in range(runs + 1):
        for verb, args in verbs.items():
            for tree, path in trees.items():
                env = {**home_env, "PYTHONPATH": str(path)}
                wall, cpu, _ = run_timed([PYTHON, "-c", LAUNCH, *args], project(work), env)
                if i:  # the first round warms the caches
                    walls[tree, verb].append(wall)
                    cpus[tree, verb].append(cpu)
    rows: list[Row] = []
    for verb in verbs:
        before, after = (statistics.median(walls[t, verb]) * 1000 for t in trees)
        cpu_before, cpu_after = (statistics.median(cpus[t, verb]) * 1000 for t in trees)
        rows.append((f"`{verb}` after ÷ before", f"{after / before:.2f}× ({after:.0f} / "
                     f"{before:.0f} ms; CPU {cpu_after:.0f} / {cpu_before:.0f})", "", None))
    return rows


def find_codex(given: str | None, install: bool, scratch: Path) -> str | None:
    if given or shutil.which("codex"):
        return given or shutil.which("codex")
    if not install or shutil.which("npm") is None:
        return None
    prefix = scratch / "codex"
    subprocess.run(["npm", "install", "--silent", "--prefix", str(prefix), "@openai/codex"],
                   check=True, capture_output=True)
    return str(prefix / "node_modules" / ".bin" / "codex")


# -- checkpoints -------------------------------------------------------------------


def checkpoint_rows(work: Path, files: int, runs: int) -> list[Row]:
    git = shutil.which("git")
    if git is None:
        return [("checkpoint of a one-file step", "git not found", "", None)]
    tree = work / "many"
    for i in range(files):
        folder = tree / f"d{i // 1000:03d}" / f"e{i // 50 % 20:02d}"
        if i % 50 == 0:
            folder.mkdir(parents=True)
        (folder / f"f{i:06d}.txt").write_text(f"file {i}\n")
    quiet = {"capture_output": True, "check": True, "cwd": tree}
    subprocess.run([git, "init", "-q"], **quiet)  # type: ignore[call-overload]
    subprocess.run([git, "add", "-A"], **quiet)  # type: ignore[call-overload]
    subprocess.run([git, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "all"],
                   **quiet)  # type: ignore[call-overload]
    out = subprocess.run([PYTHON, __file__, "--one-checkpoint", str(tree), str(runs)],
                         capture_output=True, text=True, check=True)
    took = json.loads(out.stdout)
    status = statistics.median(run_timed([git, "status", "--porcelain"], tree,
                                         dict(os.environ))[0] for _ in range(runs)) * 1000
    ratio = took["ms"] / status
    return [(f"checkpoint of a one-file step, {files:,} files ÷ `git status`",
             f"{ratio:.2f}× ({took['ms']:.0f} / {status:.0f} ms; first run's start "
             f"{took['first']:.0f} ms)", "≤ 1.5×", ratio <= 1.5)]


def one_checkpoint(tree: Path, runs: int) -> dict[str, float]:
    """checkpoint_taken ms of a step writing one file, in `runs` runs on the tree."""
    from normalize.runner import RunOptions, run_task, start_task
    from normalize.store import TaskStore
    from normalize.tables import PermissionsTable
    from normalize.workflow.spec import StepSpec, WorkflowSpec

    taken: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="ncost-home-") as home:
        for i in range(runs + 1):
            spec = WorkflowSpec(name="one", path="<bench>", driver="workflow",
                                permissions=PermissionsTable(mode="yes"),
                                steps=[StepSpec(name="w", action=f"write d000/e00/new.txt <<EOF\n"
                                                                 f"run {i}\nEOF")])
            options = RunOptions(workspace=tree, store=TaskStore(Path(home), fsync=False),
                                 fsync=False, subscribers=[taken.append])
            run_task(start_task(spec, "one", options), options)
    steps = [e.ms for e in taken if e.type == "checkpoint_taken" and e.kind == "action"]
    starts = [e.ms for e in taken if e.type == "checkpoint_taken" and e.kind == "start"]
    return {"ms": statistics.median(steps[1:]), "first": starts[0]}


# -- the table ---------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    verdict = {True: "met", False: "MISSED", None: "—"}
    lines = ["| row | measured | target | |", "|---|---|---|---|"]
    lines += [f"| {name} | {figure} | {target} | {verdict[met]} |"
              for name, figure, target, met in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tree", type=Path, help="the grep tree (default: site-packages)")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--codex")
    parser.add_argument("--install-codex", action="store_true")
    parser.add_argument("--only", help="loops, grep, step, startup or checkpoints")
    parser.add_argument("--baseline", type=Path,
                        help="with --only startup or step: also this tree's, before/after")
    parser.add_argument("--one-loop", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--one-grep", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one-checkpoint", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_loop:
        print(json.dumps(var_loop(*args.one_loop)))
        return 0
    if args.one_grep:
        print(json.dumps(one_grep(Path(args.one_grep[0]), int(args.one_grep[1]))))
        return 0
    if args.one_checkpoint:
        print(json.dumps(one_checkpoint(Path(args.one_checkpoint[0]),
                                         int(args.one_checkpoint[1]))))
        return 0
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "normalize")], check=True)
    runs = 5 if args.quick else 11
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ncost-", ignore_cleanup_errors=True) as scratch:
        work = Path(scratch)
        parts: dict[str, Callable[[], list[Row]]] = {
            "loops": lambda: loop_rows(1 if args.quick else 3,
                                       100_000 if args.quick else 1_000_000),
            "grep": lambda: grep_rows(args.tree or make_tree(work), runs),
            "step": lambda: step_rows(work, 300 if args.quick else 1000, 3, args.baseline),
            "startup": lambda: startup_rows(work, runs, find_codex(
                args.codex, args.install_codex, work)) + (
                startup_versus(work, runs, args.baseline) if args.baseline else []),
            "checkpoints": lambda: checkpoint_rows(work, 10_000 if args.quick else args.files,
                                                   3 if args.quick else 5),
        }
        for name, part in parts.items():
            if args.only and name != args.only:
                continue
            new = part()
            rows += new
            print("\n".join(table(new).splitlines()[2:]), flush=True)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
