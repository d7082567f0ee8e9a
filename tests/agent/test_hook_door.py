"""Hooks start through normalize's door for programs (`normalize.programs`), played as a
model would misbehave (`--approve auto`, `CI=true`): a venv the model wrote in the workspace,
first on PATH, never lends its `python3`; a workspace `json.py` is never imported by a hook's
`-c` or `-m`; a `setsid` child a hook left is gone when the hook is."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from agent_helpers import KEYS, cli, json_lines
from support import alive_with

from normalize.testing.servers import FakeModelServer

PLANTED = """#!/bin/sh
echo planted > {marker}
exec {python} "$@"
"""
WHO = """import json, sys
data = json.load(sys.stdin)
open({out!r}, "w").write(sys.executable)
"""
JSON_PY = "open({marker!r}, 'w').write('imported')\nraise SystemExit(3)\n"


def _agent(tmp_path: Path, repo: Path, server: FakeModelServer, hooks: list[dict[str, Any]],
           *, first_on_path: str | None = None, env: dict[str, str] | None = None,
           ) -> list[dict[str, Any]]:
    """`normalize agent` in `auto`, non-interactive, with `hooks` in the person's config."""
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    tables = [f'[[hooks]]\nevent = "run_end"\ncommand = {json.dumps(h["command"])}\n'
              f'timeout = {h.get("timeout", 30)}\n'
              f'in_workspace = {json.dumps(h.get("in_workspace", False))}\n' for h in hooks]
    (config / "config.toml").write_text("\n".join(tables))
    server.add("done nothing to do")
    extra = {"first_on_path": first_on_path} if first_on_path else {}
    # started beside the workspace (`-w`): `python -m` would import its json.py itself
    done = cli("agent", "tidy up", "--json", "--approve", "auto", "-w", str(repo),
               "--model", "anthropic:claude-sonnet-4-5", cwd=tmp_path, home=tmp_path / "home",
               env={"ANTHROPIC_BASE_URL": server.url, "NORMALIZE_CONFIG": str(config),
                    "CI": "true", **KEYS, **(env or {})}, **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return [e for e in json_lines(done.stdout) if e["type"] == "hook_ran"]


def test_a_hook_named_python3_never_runs_the_workspace_venvs_interpreter(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    marker, seen = tmp_path / "planted-ran", tmp_path / "interpreter"
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name in ("python3", "python"):
        (venv_bin / name).write_text(PLANTED.format(marker=marker, python=sys.executable))
        (venv_bin / name).chmod(0o755)
    script = tmp_path / "hook.py"
    script.write_text(WHO.format(out=str(seen)))
    ran = _agent(tmp_path, repo, server, [{"command": ["python3", str(script)]},
                                          {"command": f"python3 {script}"}],
                 first_on_path=str(venv_bin))
    assert [r["outcome"] for r in ran] == ["ok", "ok"], ran
    assert not marker.exists(), "the planted venv python3 ran outside the sandbox"
    assert not Path(seen.read_text()).is_relative_to(repo)


def test_a_hooks_python_c_or_m_never_imports_a_workspace_module(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    marker = tmp_path / "json-imported"
    (repo / "json.py").write_text(JSON_PY.format(marker=str(marker)))
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    c = [python, "-c", "import json, sys; json.load(sys.stdin)"]
    m = [python, "-m", "json.tool"]
    ran = _agent(tmp_path, repo, server, [
        {"command": c}, {"command": m},
        {"command": c, "in_workspace": True}, {"command": m, "in_workspace": True}])
    assert [r["outcome"] for r in ran] == ["ok"] * 4, ran
    assert not marker.exists(), "a hook imported the workspace's json.py"


def test_a_pythonpath_into_the_workspace_never_reaches_a_hook(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    # modules normalize itself never imports (it runs with the same PYTHONPATH)
    marker = tmp_path / "imported"
    (repo / "lib").mkdir()
    for name in ("tabnanny", "this"):
        (repo / "lib" / f"{name}.py").write_text(JSON_PY.format(marker=str(marker)))
        (repo / f"{name}.py").write_text(JSON_PY.format(marker=str(marker)))
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    c, m = [python, "-c", "import tabnanny"], [python, "-m", "this"]
    ran = _agent(tmp_path, repo, server, [
        {"command": c}, {"command": m}, {"command": c, "in_workspace": True},
        {"command": m, "in_workspace": True}],
        env={"PYTHONPATH": os.pathsep.join([str(repo / "lib"), "lib", "."])})
    assert [r["outcome"] for r in ran] == ["ok"] * 4, ran
    assert not marker.exists(), "a hook imported a workspace module through PYTHONPATH"


SETSID = """import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {token!r}],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
time.sleep({linger})
"""


def test_a_hooks_setsid_child_is_gone_when_the_hook_ends_or_times_out(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    ends, hangs = f"ends-{uuid.uuid4().hex}", f"hangs-{uuid.uuid4().hex}"
    for name, token, linger in (("ends.py", ends, 0.2), ("hangs.py", hangs, 600)):
        (tmp_path / name).write_text(SETSID.format(token=token, linger=linger))
    try:
        ran = _agent(tmp_path, repo, server, [
            {"command": [sys.executable, str(tmp_path / "ends.py")]},
            {"command": [sys.executable, str(tmp_path / "hangs.py")], "timeout": 2}])
        assert [r["outcome"] for r in ran] == ["ok", "timed_out"], ran
        deadline = time.monotonic() + 5
        while alive_with(ends) + alive_with(hangs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(ends) == [], "the setsid child of a hook that ended survived it"
        assert alive_with(hangs) == [], "the setsid child of a timed-out hook survived it"
    finally:
        for pid in alive_with(ends) + alive_with(hangs):  # never leave one behind
            os.kill(pid, signal.SIGKILL)


