"""A stdio server is a program normalize starts: it runs under the sandbox, and a workflow's
steps reach it through `[[workflow.mcp]]` like any command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp_helpers import FIXTURE_SERVER, cli, json_lines

from normalize.sandbox import SandboxTier, probe

FLOW = f'''[workflow]
name = "flow"
[workflow.permissions]
mode = "yes"
[[workflow.mcp]]
name = "fx"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(FIXTURE_SERVER))}]
timeout = 20
[[workflow.steps]]
name = "inside"
action = "mcp fx touch name=inside.txt"
[[workflow.steps]]
name = "outside"
action = "mcp fx touch name={{outside}}"
on_error = "continue"
[[workflow.steps]]
name = "git"
action = "mcp fx touch name=.git/hooks/pre-commit"
on_error = "continue"
'''


def test_a_servers_writes_stay_in_the_workspace_and_out_of_git(tmp_path: Path,
                                                               normalize_home: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    flow = tmp_path / "flow.toml"  # named on the command line: the user's own file
    flow.write_text(FLOW.replace("{outside}", str(outside)))
    proc = cli("run", str(flow), "--json", cwd=root, home=normalize_home)
    finished = [e for e in json_lines(proc.stdout) if e["type"] == "action_finished"]
    assert [e["status"] for e in finished][:2] == ["success", "error"], proc.stderr
    assert (root / "inside.txt").read_text() == "touched\n"
    assert not outside.exists()  # Landlock: writes only in the workspace
    if probe().tier is SandboxTier.FULL:  # the landlock tier has no read-only .git mount
        assert finished[2]["status"] == "error"
        assert not (root / ".git" / "hooks" / "pre-commit").exists()  # .git is read-only
    assert "fx touch answered with an error" in str(finished[1]["error"])
