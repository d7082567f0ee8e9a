"""What the sandbox costs and what it saves.

    python bench/sandbox.py              # start-up medians, the ratio, the prompt share
    python bench/sandbox.py --runs 100
    python bench/sandbox.py --writes-only  # the write guard: true, an untar, a pip install
    python bench/sandbox.py --door         # a git call through the program door, and not

Writes: `true`, an untar of 10,000 files and a `pip install --no-index` of a
local wheel (made here by hand: 200 modules) into a virtualenv inside a scratch
workspace, in the full tier and the landlock tier (each with the write guard
deciding every path change), each tier without the guard, and off; the median
of `--write-runs` each.

Start-up: `true` and `python3 -c pass` confined and started as `run_process`
starts them (`confine`, then the child's own session, stdin from /dev/null,
output piped), in each tier — `full` (namespaces + Landlock), `landlock`
(Landlock + the seccomp filter, forced here though this machine may give
`full`) and `off` (the same path, only the environment scrubbed) —
interleaved run by run so a slow moment hits all alike; the median wall time
of each and its ratio to `off`. The workspace is this repository, so the
walk that finds every `.git` and `.normalize` is part of the cost; the walk of
a generated 5,000-file tree is timed alone.

Prompts: the side-effecting actions of the 30-turn token benchmark's script
(bench/tokens.py), judged in non-interactive `auto` by the policy before the
sandbox (the "known checkers" list, read from git at BEFORE) and by today's.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BEFORE = "a98f404"  # the last commit whose approvals trusted a list of known checkers


TIERS = ("full", "landlock", "off")
WRITE_TIERS = ("full", "full-unguarded", "landlock", "unguarded", "off")
"""`full-unguarded`, `unguarded`: the full and the landlock tier without the write guard
(the prevention's own cost)."""
WORKS = ("true", "untar", "pip")


def _start(argv: list[str], tier: str, workspace: Path = ROOT) -> float:
    """Seconds to confine and run `argv` to its end in `tier` (run_process's start, no reader)."""
    from normalize.sandbox import SandboxMode, SandboxPolicy, SandboxTier, confine, landlock

    policy = SandboxPolicy(SandboxMode.OFF) if tier == "off" else SandboxPolicy()
    abi = 0 if tier == "off" else landlock.abi_version()
    kind = {"off": SandboxTier.NONE, "unguarded": SandboxTier.LANDLOCK,
            "full-unguarded": SandboxTier.FULL}.get(tier)
    started = time.perf_counter()
    confinement = confine(policy, workspace, abi=abi, label="bench",
                          tier=kind or SandboxTier(tier))
    if tier.endswith("unguarded") and confinement._plan is not None:
        confinement._plan.guard = None  # the child reads it when it starts the program
    try:
        code = subprocess.run(argv, cwd=workspace, env=confinement.env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=confinement.preexec, check=False).returncode
    finally:
        confinement.close()
    assert code == 0, (argv, tier)
    return time.perf_counter() - started


def _wheel(where: Path, modules: int = 200) -> Path:
    """A pure-Python wheel of `modules` modules, zipped by hand (no build tool needed)."""
    import base64
    import hashlib
    import zipfile

    files = {f"tinybench/m{i}.py": f"VALUE = {i}\n".encode() for i in range(modules)}
    files["tinybench/__init__.py"] = b""
    info = "tinybench-1.0.dist-info"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: tinybench\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = where / "tinybench-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def _base_python() -> str:
    """An interpreter with pip (this venv's base: uv makes venvs without one)."""
    return str(Path(sys.base_prefix) / "bin" / "python3")


def writes(runs: int, files: int = 10_000) -> dict[str, dict[str, float]]:
    """Median ms of `true`, of untarring `files` files (100 directories) and of a pip install
    of a local wheel into a virtualenv in the workspace, in each tier.

    The archive, the output and the venv lie in a scratch workspace holding a `.git`; every
    file the untar makes is an open, a utimensat and (for GNU tar) a chmod decided by the
    write guard; pip adds its renames, removals and the `.pyc` it compiles.
    """
    times: dict[tuple[str, str], list[float]] = {(w, t): [] for w in WORKS
                                                 for t in WRITE_TIERS}
    with tempfile.TemporaryDirectory() as tmp:
        ws, source = Path(tmp, "ws"), Path(tmp, "src")
        for index in range(files):
            directory = source / f"d{index // 100}"
            directory.mkdir(parents=True, exist_ok=True)
            (directory / f"f{index}.txt").write_text(f"{index}\n")
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        archive = ws / "files.tar"
        subprocess.run(["tar", "-cf", str(archive), "-C", str(source), "."], check=True)
        wheel = _wheel(ws)
        subprocess.run([_base_python(), "-m", "venv", "--without-pip", "--system-site-packages",
                        str(ws / "venv")], check=True)
        pip = [str(ws / "venv" / "bin" / "python"), "-m", "pip", "install", "--no-index",
               "--no-deps", "--force-reinstall", "--no-cache-dir",
               "--disable-pip-version-check", "-q", str(wheel)]
        for run in range(runs):
            for tier in WRITE_TIERS:
                times[("true", tier)].append(_start(["true"], tier, ws))
                out = ws / f"out-{tier}-{run}"
                out.mkdir()
                times[("untar", tier)].append(
                    _start(["tar", "-xf", str(archive), "-C", str(out)], tier, ws))
                assert sum(1 for _ in out.rglob("*.txt")) == files
                shutil.rmtree(out)
                times[("pip", tier)].append(_start(pip, tier, ws))
                assert any((ws / "venv").rglob("tinybench/m199.py")), tier
                for installed in (ws / "venv").rglob("tinybench*"):
                    shutil.rmtree(installed, ignore_errors=True)
    return {work: {tier: statistics.median(times[(work, tier)]) * 1000 for tier in WRITE_TIERS}
            for work in WORKS}


def startup(runs: int) -> list[dict[str, Any]]:
    """Median ms of starting each program in each tier, interleaved run by run."""
    programs = {"true": ["true"], "python3 -c pass": [sys.executable, "-c", "pass"]}
    times: dict[tuple[str, str], list[float]] = {(p, t): [] for p in programs for t in TIERS}
    for _ in range(runs):
        for program, argv in programs.items():
            for tier in TIERS:
                times[(program, tier)].append(_start(argv, tier))
    rows = []
    for program in programs:
        ms = {tier: statistics.median(times[(program, tier)]) * 1000 for tier in TIERS}
        rows.append({"program": program, **{f"{t}_ms": ms[t] for t in TIERS},
                     "full_ratio": ms["full"] / ms["off"],
                     "landlock_ratio": ms["landlock"] / ms["off"]})
    return rows


def walk_ms(files: int = 5000) -> tuple[float, float]:
    """Median ms of finding the protected paths in this repository and in a `files`-file tree."""
    from normalize.sandbox import protected_paths

    def timed(root: Path) -> float:
        samples = []
        for _ in range(9):
            started = time.perf_counter()
            list(protected_paths(str(root)))
            samples.append(time.perf_counter() - started)
        return statistics.median(samples) * 1000

    with tempfile.TemporaryDirectory() as tmp:
        for index in range(files):
            directory = Path(tmp, f"pkg{index // 100}", f"mod{index // 10 % 10}")
            directory.mkdir(parents=True, exist_ok=True)
            (directory / f"f{index}.py").write_text("x = 1\n")
        Path(tmp, "pkg3", ".git").mkdir()
        return timed(ROOT), timed(Path(tmp))


def _old_policy_module() -> ModuleType:
    source = subprocess.run(["git", "show", f"{BEFORE}:normalize/tools/approval.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("approval_before_sandbox", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(source, "approval_before_sandbox.py", "exec"), module.__dict__)
    return module


def prompts() -> dict[str, Any]:
    """How many of the token benchmark's side effects ask under each policy (auto, no person)."""
    from tokens import script

    from normalize.intents import parse
    from normalize.tools import default_tools
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy
    from normalize.tools.base import ToolContext
    from normalize.tools.guard import WorkspaceGuard

    old = _old_policy_module()
    tools = default_tools()
    actions = [action for reply in script(30) if isinstance(reply, str)
               for action in parse(reply).actions if not tools.is_read_only(action)]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ToolContext(workspace=Path(tmp), guard=WorkspaceGuard(Path(tmp)), cache=None,  # type: ignore[arg-type]
                          policy=ApprovalPolicy(mode=ApprovalMode.AUTO))
        new_asks = [a for a in actions
                    if ApprovalPolicy(mode=ApprovalMode.AUTO).check(a, ctx) is not None]
        old_policy = old.ApprovalPolicy(mode=old.ApprovalMode.AUTO)
        old_asks = [a for a in actions if old_policy.check(a, ctx) is not None]
    return {"side_effects": len(actions), "asked_before": len(old_asks),
            "asked_now": len(new_asks),
            "removed": 1 - len(new_asks) / len(old_asks) if old_asks else 0.0,
            "examples": sorted({a.text.split(" -c ")[0] for a in old_asks})}


def door(runs: int) -> tuple[float, float]:
    """Median ms of `git --version` started by subprocess and through `normalize.programs`
    (what routing the checkpoints' git through the door would add to each call)."""
    from normalize import programs

    git = programs.trusted_program("git")
    assert git is not None
    plain, through = [], []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([git, "--version"], capture_output=True, cwd=ROOT, check=True)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert programs.run(["git", "--version"], timeout=30, cwd=ROOT).ok
        through.append(time.perf_counter() - started)
    return statistics.median(plain) * 1000, statistics.median(through) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--write-runs", type=int, default=5)
    parser.add_argument("--writes-only", action="store_true",
                        help="only the write guard's table (true and a 10,000-file untar)")
    parser.add_argument("--door", action="store_true",
                        help="only a git call through the program door, beside subprocess")
    args = parser.parse_args(argv)
    if args.door:
        plain, through = door(args.runs)
        print(f"`git --version`: subprocess {plain:.2f} ms, the program door {through:.2f} ms "
              f"({through / plain:.1f}x)")
        return 0
    found_writes = writes(args.write_runs)
    print("| work | full (ms) | full, no guard | landlock (ms) | landlock, no guard | off (ms) "
          "| full / off | landlock / off |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    labels = {"true": "`true`", "untar": "untar 10,000 files",
              "pip": "`pip install` a local wheel (200 modules) into a venv"}
    for work, label in labels.items():
        row = found_writes[work]
        print(f"| {label} | {row['full']:.1f} | {row['full-unguarded']:.1f} | "
              f"{row['landlock']:.1f} | {row['unguarded']:.1f} | {row['off']:.1f} | "
              f"{row['full'] / row['off']:.2f} | {row['landlock'] / row['off']:.2f} |")
    for tier, bare in (("full", "full-unguarded"), ("landlock", "unguarded")):
        per_file = (found_writes["untar"][tier] - found_writes["untar"][bare]) / 10
        print(f"write guard, {tier} tier: {per_file:.0f} µs per file untarred "
              f"(open + times + mode)")
    print()
    if args.writes_only:
        return 0
    print("| program | full (ms) | landlock (ms) | off (ms) | full / off | landlock / off |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in startup(args.runs):
        print(f"| `{row['program']}` | {row['full_ms']:.1f} | {row['landlock_ms']:.1f} | "
              f"{row['off_ms']:.1f} | {row['full_ratio']:.2f} | {row['landlock_ratio']:.2f} |")
    repo, tree = walk_ms()
    print(f"\nwalk for .git/.normalize: {repo:.1f} ms on this repository, "
          f"{tree:.1f} ms on a 5,000-file tree")
    found = prompts()
    print(f"\n30-turn token benchmark, non-interactive auto: {found['side_effects']} side "
          f"effects; asked before the sandbox: {found['asked_before']} "
          f"({', '.join(found['examples'])}); asked now: {found['asked_now']}; "
          f"prompts removed: {found['removed']:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
