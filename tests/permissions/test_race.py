"""The file tools cannot be raced out of the workspace by swapping a directory for a symlink."""

from __future__ import annotations

import subprocess
import sys
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
import os, sys
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
'''


def test_writes_racing_a_symlink_swap_leave_nothing_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    stop = tmp_path / "stop"
    ctx = ToolContext(workspace=root, guard=WorkspaceGuard(root), cache=NoCache(),
                      policy=ApprovalPolicy(mode="auto"))
    tools = default_tools()
    racer = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root / "d"), str(outside),
                              str(stop)], stdout=subprocess.PIPE, text=True)
    statuses: list[ResultStatus] = []
    try:
        assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        for i in range(WRITES):
            action = parse_command(f"write d/sub{i % 7}/f{i}.txt <<EOF\nnumber {i}\nEOF")
            statuses.append(tools.execute(action, ctx).status)
    finally:
        stop.touch()
        try:
            racer.wait(timeout=10)
        finally:
            racer.kill()
            racer.wait()
            if racer.stdout is not None:
                racer.stdout.close()
    landed_outside = list(outside.rglob("*"))
    assert landed_outside == []
    written = list(root.rglob("f*.txt"))
    assert len(statuses) == WRITES
    assert ResultStatus.SUCCESS in statuses  # the writes that went through are inside
    assert len(written) == statuses.count(ResultStatus.SUCCESS)
