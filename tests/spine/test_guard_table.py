"""Issue 3's bad-input table: each is refused with a clear message and nothing changes on disk."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from helpers import cli, json_lines

from normalize.execution.cache import NoCache
from normalize.intents import parse_command
from normalize.task import ResultStatus
from normalize.tools import default_tools
from normalize.tools.approval import ApprovalPolicy
from normalize.tools.base import ToolContext
from normalize.tools.guard import WorkspaceGuard


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                out[str(path.relative_to(root))] = "link:" + os.readlink(path)
            else:
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "twice.py").write_text("x = 1\ny = 2\nx = 1\n")
    (root / "-rf").write_text("a file with an unlucky name\n")
    (root / "escape").symlink_to("/etc")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (root / "link.txt").symlink_to(outside)
    (root / "sub" / ".git").mkdir(parents=True)  # a nested repository
    (root / "sub" / ".git" / "config").write_text("[core]\n")
    (root / "wt").mkdir()
    (root / "wt" / ".git").write_text("gitdir: ../.git/worktrees/wt\n")  # a worktree's file
    (root / ".normalize" / "workflows").mkdir(parents=True)
    (root / "to-git").symlink_to("sub/.git")
    return root


CASES = [
    ("view ../../etc/passwd", ResultStatus.BLOCKED, "`..` leads outside the workspace"),
    ("view /etc/passwd", ResultStatus.BLOCKED, "absolute paths are not allowed"),
    ("view link.txt", ResultStatus.BLOCKED, "a symlink points outside the workspace"),
    ("view escape/passwd", ResultStatus.BLOCKED, "a symlink points outside the workspace"),
    ("write .git/config <<EOF\n[core]\nbare = true\nEOF", ResultStatus.BLOCKED,
     "writes into .git are not allowed"),
    ("write sub/.git/config <<EOF\n[core]\nfsmonitor = touch pwned\nEOF", ResultStatus.BLOCKED,
     "writes into .git are not allowed"),
    ("write wt/.git <<EOF\ngitdir: /elsewhere\nEOF", ResultStatus.BLOCKED,
     "writes into .git are not allowed"),
    ("write to-git/hooks/pre-commit <<EOF\ntouch pwned\nEOF", ResultStatus.BLOCKED,
     "writes into .git are not allowed"),
    ("edit sub/.git/config <<EOF\n<<<<<<< SEARCH\n[core]\n=======\n[x]\n>>>>>>> REPLACE\nEOF",
     ResultStatus.BLOCKED, "writes into .git are not allowed"),
    ("write .normalize/workflows/dwim.toml <<EOF\n[workflow.permissions]\nmode = \"yes\"\nEOF",
     ResultStatus.BLOCKED, "writes into .normalize/ are not allowed"),
    ("write .normalize/config.toml <<EOF\nx = 1\nEOF", ResultStatus.BLOCKED,
     "writes into .normalize/ are not allowed"),
    ("edit twice.py <<EOF\n<<<<<<< SEARCH\nx = 1\n=======\nx = 3\n>>>>>>> REPLACE\nEOF",
     ResultStatus.ERROR, "lines 1, 3"),
    ("edit twice.py <<EOF\n<<<<<<< SEARCH\nz = 9\n=======\nz = 3\n>>>>>>> REPLACE\nEOF",
     ResultStatus.ERROR, "The closest lines"),
    ("run rm -rf /", ResultStatus.BLOCKED, "rm"),
    ('run "pytest; rm -rf ~"', ResultStatus.BLOCKED, "rm -rf ~"),
    ("run ls && rm -r twice.py", ResultStatus.BLOCKED, "rm -r twice.py"),
]


@pytest.mark.parametrize(("command", "status", "message"), CASES, ids=[c[0][:30] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(workspace: Path, command: str,
                                                  status: ResultStatus, message: str) -> None:
    before = snapshot(workspace)
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="auto", interactive=False))
    result = default_tools().execute(parse_command(command), ctx)
    assert result.status is status, result
    assert message in (result.error or ""), result.error
    assert snapshot(workspace) == before


def test_reading_git_and_normalize_dirs_is_still_allowed(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="auto"))
    shown = default_tools().execute(parse_command("view sub/.git/config"), ctx)
    assert shown.ok and "[core]" in shown.output


def test_a_file_named_dash_rf_is_a_plain_name(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="yes"))
    tools = default_tools()
    shown = tools.execute(parse_command("view -rf"), ctx)
    assert shown.ok and "unlucky name" in shown.output
    code = "import sys, pathlib; print(pathlib.Path(sys.argv[1]).read_text())"
    ran = tools.execute(parse_command(f"run {sys.executable} -c '{code}' -rf"), ctx)
    assert ran.ok and "unlucky name" in ran.output
    assert (workspace / "-rf").exists()


def test_the_cli_refuses_escapes_with_one_line_and_exit_2(workspace: Path,
                                                          normalize_home: Path) -> None:
    proc = cli("view", "../../etc/passwd", cwd=workspace, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "normalize: error: refused '../../etc/passwd': `..` leads outside the workspace"]
    assert proc.stdout == ""


def test_fetch_returns_a_long_result_whole_after_resume_in_a_new_process(
        tmp_path: Path, normalize_home: Path) -> None:
    code = "print(chr(10).join('line %d' % i for i in range(2000)))"
    flow = tmp_path / "long.toml"
    flow.write_text(f'''
[workflow]
name = "long-output"

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "produce"
action = """run {sys.executable} -c "{code}" """

[[workflow.steps]]
name = "pause"
action = "ask Carry on?"

[[workflow.steps]]
name = "fetch"
action = "fetch r1"
capture = "whole"

[[workflow.steps]]
name = "keep"
action = """write out.txt <<EOF
{{whole}}
EOF"""
''')
    first = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert first.returncode == 4, first.stderr
    events = json_lines(first.stdout)
    produced = next(e for e in events if e["type"] == "action_finished")
    assert produced["cache_id"] == "r1"
    assert "more lines — fetch r1" in produced["preview"]
    assert len(produced["preview"].splitlines()) < 40
    waiting = [e for e in events if e["type"] == "waiting_for_input"]
    assert waiting and waiting[0]["question"] == "Carry on?"

    task_id = events[0]["task_id"]
    second = cli("resume", task_id, "--answer", "yes", "--json", cwd=tmp_path,
                 home=normalize_home)
    assert second.returncode == 0, second.stderr
    lines = (tmp_path / "out.txt").read_text().rstrip("\n").splitlines()
    assert lines[0] == "line 0" and lines[1999] == "line 1999" and len(lines) == 2000


def test_secrets_never_reach_the_journal_or_the_cache(tmp_path: Path,
                                                      normalize_home: Path) -> None:
    (tmp_path / ".env").write_text("SERVICE_TOKEN=tok_8f3a9c2e71d4b605\n")
    key = "sk-ant-api03-" + "A1b2C3d4E5f6" * 4
    code = f"print('Authorization: Bearer abcdefghijklmnop1234'); print('{key}')"
    flow = tmp_path / "leak.toml"
    flow.write_text(f'''
[workflow]
name = "leak"

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "print"
action = """run {sys.executable} -c "{code}" """

[[workflow.steps]]
name = "show env"
action = "view .env"
''')
    proc = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    # shown data only: the task file (what resume executes) is exact and owner-only
    tasks = normalize_home / "tasks"
    stored = "".join(p.read_text() for p in [*tasks.glob("*.jsonl"), *tasks.glob("*/cache/*")])
    assert "[REDACTED]" in stored and "[REDACTED]" in proc.stdout
    for secret in (key, "abcdefghijklmnop1234", "tok_8f3a9c2e71d4b605"):
        assert secret not in stored
        assert secret not in proc.stdout  # --json goes to CI logs and artifacts


def test_quoted_operators_are_not_a_chain(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="auto", allow=[f"{sys.executable} -c *"]))
    tools = default_tools()
    result = tools.execute(parse_command(f'run {sys.executable} -c "import os; print(1)"'), ctx)
    assert result.ok, result.error
    chained = tools.execute(parse_command(f"run {sys.executable} -c 1 ; rm -r twice.py"), ctx)
    assert chained.status is ResultStatus.BLOCKED and "rm -r twice.py" in (chained.error or "")
    assert (workspace / "twice.py").exists()


def test_fetch_through_the_registry_returns_the_whole_text(workspace: Path,
                                                           tmp_path: Path) -> None:
    from normalize.execution.cache import PersistentCache

    cache = PersistentCache(tmp_path / "cache")
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=cache,
                      policy=ApprovalPolicy(mode="yes"))
    tools = default_tools()
    code = "print(chr(10).join(str(i) for i in range(3000)))"
    produced = tools.execute(parse_command(f'run {sys.executable} -c "{code}"'), ctx)
    assert produced.cache_id is not None and len(produced.preview) < len(produced.output)
    fetched = tools.execute(parse_command(f"fetch {produced.cache_id}"), ctx)
    assert fetched.ok and fetched.output.splitlines()[-1] == "2999"
    assert fetched.cache_id is None


def test_allow_shell_runs_an_approved_chain_through_the_shell(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                      policy=ApprovalPolicy(mode="yes", allow_shell=True))
    result = default_tools().execute(parse_command("run echo one && echo two > out.txt"), ctx)
    assert result.ok, result.error
    assert (workspace / "out.txt").read_text() == "two\n"
    strict = ToolContext(workspace=workspace, guard=WorkspaceGuard(workspace), cache=NoCache(),
                         policy=ApprovalPolicy(mode="yes"))
    refused = default_tools().execute(parse_command("run echo three > out.txt"), strict)
    assert refused.status is ResultStatus.ERROR and "without a shell" in (refused.error or "")
    assert (workspace / "out.txt").read_text() == "two\n"


def test_walks_skip_virtual_environments_whatever_their_name(tmp_path: Path) -> None:
    from normalize.tools.files import walk

    (tmp_path / "env-3.11" / "lib").mkdir(parents=True)
    (tmp_path / "env-3.11" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "env-3.11" / "lib" / "big.py").write_text("x = 1\n")
    (tmp_path / "app.py").write_text("y = 2\n")
    assert [p.name for p in walk(tmp_path)] == ["app.py"]


def test_tests_run_in_the_projects_own_virtual_environment(tmp_path: Path) -> None:
    from normalize.tools.test import pytest_command

    assert pytest_command(tmp_path) == [sys.executable, "-m", "pytest"]  # no venv yet
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "pytest"
    site.mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / ".venv" / "bin").mkdir()
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    assert pytest_command(tmp_path) == [str(tmp_path / ".venv" / "bin" / "python"), "-m",
                                        "pytest"]


def test_a_scope_keeps_its_results_the_way_its_cache_strategy_says(
        tmp_path: Path, normalize_home: Path) -> None:
    code = "print(chr(10).join('row %d' % i for i in range(300)))"
    run = f'run {sys.executable} -c "{code}"'
    flow = tmp_path / "scoped.toml"
    flow.write_text(f'''
[workflow]
name = "scoped-caches"

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "root"
action = """{run}"""

[[workflow.steps]]
name = "in memory"
cache = "memory"
  [[workflow.steps.steps]]
  action = """{run} x"""
  [[workflow.steps.steps]]
  action = "fetch m1"
  capture = "whole"

[[workflow.steps]]
name = "kept nowhere"
cache = "none"
  [[workflow.steps.steps]]
  action = """{run} y"""

[[workflow.steps]]
name = "end"
action = "done {{whole}}"
''')
    proc = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    finished = [e for e in json_lines(proc.stdout) if e["type"] == "action_finished"]
    assert [e["cache_id"] for e in finished] == ["r1", "m1", None, None]
    assert "not kept" in finished[3]["preview"]  # [2] is the fetch: whole, not previewed
    summary = json_lines(proc.stdout)[-1]["summary"]
    assert summary.splitlines()[-1] == "row 299"
