"""`grep` says how many files it could not read, on ripgrep and in Python, never hiding them.

Root reads every file whatever its mode, so the search runs in a child whose
DAC capabilities are dropped from its bounding set before it starts: a file of
mode 000 is then as unreadable to it as to any other user.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
SEARCH = """
import json, sys
from pathlib import Path
from normalize.execution.cache import NoCache
from normalize.task import Action
from normalize.tools.approval import ApprovalMode, ApprovalPolicy
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.grep import GrepTool
from normalize.tools.guard import WorkspaceGuard

root = Path(sys.argv[1])
ctx = ToolContext(workspace=root, guard=WorkspaceGuard(root), cache=NoCache(),
                  policy=ApprovalPolicy(mode=ApprovalMode.NEVER))
tools = ToolRegistry([GrepTool(engine=sys.argv[2])])
result = tools.execute(Action("grep", {"args": ["needle"], "body": None}), ctx)
print(json.dumps({"output": result.output, "data": result.data}))
"""


def drop_dac() -> None:
    """In the child, before exec: no reading past a file's mode, even as root."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def search(root: Path, engine: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SEARCH, str(root), engine],
                          preexec_fn=drop_dac if os.geteuid() == 0 else None,
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "prctl" in done.stderr:
        pytest.skip("capabilities cannot be dropped here, so root reads every file")
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_files_that_could_not_be_read_are_counted_and_named(tmp_path: Path, engine: str) -> None:
    (tmp_path / "a.txt").write_text("needle here\n")
    for name in ("locked.txt", "sub/also.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("needle hidden\n")
        (tmp_path / name).chmod(0)
    try:
        found = search(tmp_path, engine)
    finally:
        for name in ("locked.txt", "sub/also.txt"):
            (tmp_path / name).chmod(0o644)
    assert found["output"] == ("a.txt:1: needle here\n"
                               "(2 files could not be read: locked.txt, sub/also.txt)")
    data = found["data"]
    assert isinstance(data, dict) and data["unreadable"] == 2 and data["matches"] == 1
