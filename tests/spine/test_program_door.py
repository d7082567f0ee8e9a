"""One door for every program normalize starts outside the sandbox (`normalize.programs`).

An `ast` walk reads every module under `normalize/` and finds each place that can start a
process: `subprocess` (`run`, `Popen`, `call`, `check_call`, `check_output`, `getoutput`,
`getstatusoutput`), `os` (`system`, `popen`, `exec*`, `spawn*`, `posix_spawn*`, `fork`,
`forkpty`), `asyncio.create_subprocess_*` and a loop's `subprocess_exec`/`subprocess_shell`,
`pty.spawn` and `pty.fork` — called or passed on, under any alias (`import subprocess as sp`,
`from os import execv`). Only the door, the sandbox's own launches and normalize starting
itself may; `DEBTS` lists the modules not routed through the door yet, each with why. The
lists may only shrink: a new place that starts a process goes through the door.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import normalize

PACKAGE = Path(normalize.__file__).resolve().parent

DOOR = "normalize.programs"
SANDBOX_LAUNCHES = {
    "normalize.tools.run": "run_process: every program of a task, in the sandbox",
    "normalize.sandbox.tiers": "the trial run of a confined `true` that finds the tier",
    "normalize.tools.ripgrep": "ripgrep for `grep`, confined by Landlock to the workspace",
    "normalize.mcp.transport": "an MCP server, started in the sandbox",
    "normalize.drivers.acp": "an ACP agent (the acp driver), started in the sandbox",
}
ITSELF = {  # its own interpreter and environment: a worker sandboxes its programs itself
    "normalize.execution.local": "a sub-task's or batch item's worker",
    "normalize.execution.ray": "a Ray worker's sub-task",
    "normalize.execution.warm": "a batch's warm worker (normalize.cli.worker)",
    "normalize.cli.worker": "a warm worker's fork: a batch item's process",
    "normalize.cli.action": "the GitHub Action's steps",
}
DEBTS = {  # trusted, hardened git already; not through the door yet
    "normalize.checkpoints.shadow": "git on every checkpoint, 3 or more calls, two streamed, "
                                    "and a streamed fast-import: the door does not stream, "
                                    "and costs 12-20 ms a call against about 1 ms (its "
                                    "reaper's fork; `bench/sandbox.py --door`)",
    "normalize.checkpoints.isolate": "git that writes out and diffs an isolated copy: the "
                                     "checkpoints' own calls, the same cost",
}
ALLOWED = {DOOR, *SANDBOX_LAUNCHES, *ITSELF, *DEBTS}

SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output", "getoutput",
              "getstatusoutput"}
OS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl", "execle",
      "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl", "spawnle",
      "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"}
LAUNCHERS = {"subprocess": SUBPROCESS, "os": OS, "pty": {"spawn", "fork"},
             "asyncio": {"create_subprocess_exec", "create_subprocess_shell"}}
ANY_OBJECT = {"subprocess_exec", "subprocess_shell", "create_subprocess_exec",
              "create_subprocess_shell"}  # a loop's methods, asyncio's under any name


@dataclass(frozen=True)
class Start:
    """One place in a module that can start a process."""

    line: int
    what: str


def starts_in(source: str) -> Iterator[Start]:
    """Every reference to a way of starting a process in `source` (type annotations aside)."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> launcher module
    names: dict[str, str] = {}  # local name -> "module.function"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in LAUNCHERS:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in LAUNCHERS:
            for alias in node.names:
                if alias.name in LAUNCHERS[node.module]:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    hints = {id(n) for a in _annotations(tree) for n in ast.walk(a)}
    for node in ast.walk(tree):
        if id(node) in hints:
            continue
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and node.attr in LAUNCHERS.get(
                    modules.get(base.id, ""), ()):
                yield Start(node.lineno, f"{modules[base.id]}.{node.attr}")
            elif node.attr in ANY_OBJECT:
                yield Start(node.lineno, f"….{node.attr}")
        elif isinstance(node, ast.Name) and node.id in names and \
                isinstance(node.ctx, ast.Load):
            yield Start(node.lineno, names[node.id])


def _annotations(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            yield node.annotation
        elif isinstance(node, ast.arg) and node.annotation is not None:
            yield node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            yield node.returns


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def violations(package: Path = PACKAGE) -> dict[str, list[Start]]:
    """module -> its starts, for each module outside the door and the lists that starts one."""
    found: dict[str, list[Start]] = {}
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        starts = list(starts_in(path.read_text()))
        if starts and module not in ALLOWED:
            found[module] = starts
    return found


def test_every_process_normalize_starts_goes_through_the_door_or_the_sandbox() -> None:
    found = violations()
    said = [f"{module}:{s.line}: {s.what}" for module, starts in found.items() for s in starts]
    assert not said, ("a process started outside normalize.programs (the door) and the "
                      "sandbox's launches:\n" + "\n".join(said))


def test_the_allowed_list_only_holds_modules_that_still_start_processes() -> None:
    idle = [m for m in sorted(ALLOWED - {DOOR}) if not list(starts_in(
        (PACKAGE.parent / (m.replace(".", "/") + ".py")).read_text()))]
    assert not idle, f"no longer starts a process: take it off the list: {idle}"


PLANTED = '''from __future__ import annotations
import os
import subprocess as sp
from asyncio import create_subprocess_exec as spawn
from pty import spawn as pty_spawn

def hint(proc: sp.Popen[bytes]) -> sp.CompletedProcess[bytes]: ...
def a(): sp.run(["git", "status"])
def b(): os.execvp("git", ["git"])
def c(): spawn("git")
def d(loop): loop.subprocess_exec(object, "git")
def e(): os.posix_spawn("/bin/sh", ["sh"], {})
def f(): pty_spawn(["sh"])
factory = sp.Popen
'''


def test_the_checker_finds_a_process_started_any_of_those_ways() -> None:
    found = sorted((s.line, s.what) for s in starts_in(PLANTED))
    assert found == [(8, "subprocess.run"), (9, "os.execvp"),
                     (10, "asyncio.create_subprocess_exec"), (11, "….subprocess_exec"),
                     (12, "os.posix_spawn"), (13, "pty.spawn"), (14, "subprocess.Popen")], found


def test_a_planted_start_outside_the_door_fails_the_walk(tmp_path: Path) -> None:
    package = tmp_path / "normalize"
    (package / "tools").mkdir(parents=True)
    for name in ("programs.py", "tools/run.py", "tools/helper.py"):
        (package / name).write_text(PLANTED)
    (package / "quiet.py").write_text("import subprocess\nerror = subprocess.CalledProcessError\n")
    assert sorted(violations(package)) == ["normalize.tools.helper"]
