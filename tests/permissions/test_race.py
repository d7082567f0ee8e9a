"""The file tools cannot be raced out of the workspace by swapping a directory for a symlink."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from normalize.execution.cache import NoCache
from normalize.intents import parse_command
from normalize.task import ResultStatus
from normalize.tools import default_tools
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext
from normalize.tools.guard import WorkspaceGuard

WRITES = 500

SWAPPER = r'''
import os, sys, time
directory, outside, stop = sys.argv[1:4]
parked, made = directory + ".parked", 0
print("ready", flush=True)
while not os.path.exists(stop):
    try:
        os.rename(directory, parked)
    except OSError:
        continue
    try:
        os.symlink(outside, directory)
    except FileExistsError:
        pass  # a write found the directory missing and made a new one
    time.sleep(0.0002)  # a link for a moment
    while True:  # put the real directory back, setting aside whatever took its place
        try:
            os.rename(parked, directory)
            break
        except OSError:
            if os.path.islink(directory):
                os.unlink(directory)
            else:
                made += 1
                os.rename(directory, f"{directory}.made{made}")
    time.sleep(0.0002)  # a real directory for a moment
'''


@contextlib.contextmanager
def swapping(directory: Path, outside: Path) -> Iterator[None]:
    """A separate process swaps `directory` for a link to `outside` until the block ends."""
    stop = directory.parent.parent / "stop"
    racer = subprocess.Popen([sys.executable, "-c", SWAPPER, str(directory), str(outside),
                              str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        yield
    finally:
        stop.touch()
        try:
            racer.wait(timeout=10)
        finally:
            racer.kill()
            racer.wait()
            if racer.stdout is not None:
                racer.stdout.close()


def _context(root: Path) -> ToolContext:
    return ToolContext(workspace=root, guard=WorkspaceGuard(root), cache=NoCache(),
                       policy=ApprovalPolicy(mode="auto"))


def test_writes_racing_a_symlink_swap_leave_nothing_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    ctx, tools = _context(root), default_tools()
    statuses: list[ResultStatus] = []
    with swapping(root / "d", outside):
        for i in range(WRITES):
            action = parse_command(f"write d/sub{i % 7}/f{i}.txt <<EOF\nnumber {i}\nEOF")
            statuses.append(tools.execute(action, ctx).status)
    landed_outside = list(outside.rglob("*"))
    assert landed_outside == []
    written = list(root.rglob("f*.txt"))
    assert len(statuses) == WRITES
    assert ResultStatus.SUCCESS in statuses  # the writes that went through are inside
    assert len(written) == statuses.count(ResultStatus.SUCCESS)


def test_reads_racing_a_symlink_swap_never_show_the_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "notes.py").write_text("def inside() -> None:\n    pass\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.py").write_text("def SECRET() -> None:\n    pass\n")
    ctx, tools = _context(root), default_tools()
    outputs: list[str] = []
    deadline = time.monotonic() + 120
    with swapping(root / "d", outside):  # 300 reads, and on until one got through the race
        i = 0
        while i < 300 or (not any("inside" in out for out in outputs)
                          and time.monotonic() < deadline):
            command = ("view d/notes.py", "grep def d", "skeleton d/notes.py")[i % 3]
            result = tools.execute(parse_command(command), ctx)
            outputs.append(result.output + (result.error or ""))
            i += 1
    assert not [out for out in outputs if "SECRET" in out]
    assert any("inside" in out for out in outputs)
