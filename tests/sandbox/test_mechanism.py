"""The mechanism under the sandbox: Landlock masks, the rules it builds, the child it starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sandbox_support import needs_full

from normalize.errors import NormalizeError, ToolError
from normalize.runner import RunOptions, sandbox_policy
from normalize.sandbox import (
    SandboxMode,
    SandboxPolicy,
    SandboxTier,
    confine,
    landlock,
    probe,
    protected_paths,
    scrub_env,
)
from normalize.sandbox.confinement import _readable
from normalize.tools.run import run_process


def sh(command: str, ws: Path, policy: SandboxPolicy | None = None,
       env: dict[str, str] | None = None) -> tuple[int | None, str]:
    outcome = run_process(["/bin/sh", "-c", command], cwd=ws, timeout=30, sandbox=policy, env=env)
    return outcome.exit_code, outcome.output


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path / "ws"


def test_the_handled_rights_grow_with_the_abi() -> None:
    assert landlock.abi_version() >= 1
    assert not landlock.fs_handled(1) & (landlock.REFER | landlock.TRUNCATE | landlock.IOCTL_DEV)
    assert landlock.fs_handled(2) & landlock.REFER
    assert not landlock.fs_handled(2) & landlock.TRUNCATE
    assert landlock.fs_handled(5) & landlock.IOCTL_DEV
    assert landlock.fs_handled(7) == landlock.ACCESS_READ | landlock.ACCESS_WRITE


def test_protected_paths_are_found_at_any_depth_without_following_links(tmp_path: Path) -> None:
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "a" / "b" / ".git").mkdir(parents=True)
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git file
    (tmp_path / ".normalize").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    found = sorted(Path(p).relative_to(tmp_path).as_posix() for p in protected_paths(str(tmp_path)))
    assert found == [".git", ".normalize", "a/b/.git", "wt/.git"]


def test_read_rules_cover_everything_but_the_hidden_paths(tmp_path: Path) -> None:
    for name in ("keep", "home/.ssh", "home/code", "home/.config/gh", "home/.config/git"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "home" / "keys").symlink_to(tmp_path / "home" / ".ssh")
    hidden = {str(tmp_path / "home" / ".ssh"), str(tmp_path / "home" / ".config" / "gh")}
    rules = {Path(p).relative_to(tmp_path).as_posix() for p in _readable(str(tmp_path), hidden)}
    assert rules == {"keep", "home/code", "home/.config/git"}  # the link into .ssh is not a way in


def test_grandchildren_inherit_the_confinement(ws: Path) -> None:
    outside = ws.parent / "outside"
    code, output = sh(f"sh -c 'python3 -c \"open(\\\"{outside}/deep\\\", \\\"w\\\")\"'", ws)
    assert code != 0 and ("Permission denied" in output or "No such file" in output)  # /tmp
    assert list(outside.iterdir()) == []


@needs_full
def test_a_worktree_git_file_is_read_only(ws: Path) -> None:
    (ws / ".git").write_text("gitdir: ../elsewhere\n")
    code, output = sh("echo x >> .git; rm -f .git", ws)
    # the write guard refuses first (EACCES); the read-only bind lies beneath it
    assert code != 0 and "Permission denied" in output
    assert (ws / ".git").read_text() == "gitdir: ../elsewhere\n"


@needs_full
def test_the_full_tiers_read_only_binds_hold_without_the_write_guard(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    confinement = confine(SandboxPolicy(), ws, abi=landlock.abi_version(), tier=SandboxTier.FULL)
    assert confinement._plan is not None
    confinement._plan.guard = None  # the second layer alone (read by the child as it starts)
    try:
        proc = subprocess.run(["/bin/sh", "-c", "echo x >> .git/config"], cwd=ws,
                              env=confinement.env, preexec_fn=confinement.preexec,
                              capture_output=True, text=True, timeout=30, check=False)
    finally:
        confinement.close()
    assert proc.returncode != 0 and "Read-only file system" in proc.stderr
    assert (ws / ".git" / "config").read_text() == "[core]\n"


def test_read_only_mode_denies_the_workspace_and_off_allows_everything(ws: Path) -> None:
    code, _ = sh("touch x", ws, SandboxPolicy(SandboxMode.READ_ONLY))
    assert code != 0 and not (ws / "x").exists()
    outside = ws.parent / "outside"
    code, _ = sh(f"touch {outside}/y", ws, SandboxPolicy(SandboxMode.OFF))
    assert code == 0 and (outside / "y").exists()


def test_the_environment_is_scrubbed_in_every_mode(ws: Path) -> None:
    env = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "k1", "GH_TOKEN": "k2",
           "DB_PASSWORD": "k3", "AWS_SECRET_ACCESS_KEY": "k4", "MY_SECRET_X": "k5",
           "KEEP_TOKEN": "k6", "EDITOR": "vi"}
    for mode in SandboxMode:
        _, output = sh("env", ws, SandboxPolicy(mode, env_allow=("KEEP_TOKEN",)), env)
        assert "EDITOR=vi" in output and "KEEP_TOKEN=k6" in output
        assert not any(f"=k{i}" in output for i in range(1, 6)), (mode, output)
    assert scrub_env({"HF_TOKEN": "x", "HOME": "/h"}) == {"HOME": "/h"}


def test_without_a_sandbox_no_program_starts_unless_the_mode_is_off(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMALIZE_NO_SANDBOX", "1")
    assert not probe().available and "NORMALIZE_NO_SANDBOX" in probe().reason
    with pytest.raises(ToolError, match="--sandbox off"):
        sh("touch x", ws)
    assert not (ws / "x").exists()
    assert sh("touch x", ws, SandboxPolicy(SandboxMode.OFF))[0] == 0


def test_sandbox_policy_takes_the_flags_over_the_workflow(tmp_path: Path) -> None:
    options = RunOptions(workspace=tmp_path, sandbox="read-only", env_allow=["A"])
    policy = sandbox_policy(options, {"sandbox": "off", "network": True, "env_allow": ["B"]},
                            hidden=("/store",))
    assert policy.mode is SandboxMode.READ_ONLY and policy.network is True
    assert policy.env_allow == ("B", "A") and "/store" in policy.hidden
    assert sandbox_policy(RunOptions(workspace=tmp_path), {}).mode is SandboxMode.WORKSPACE
    assert sandbox_policy(RunOptions(workspace=tmp_path, network=False),
                          {"network": True}).network is False
    with pytest.raises(NormalizeError, match="sandbox = 'loose': expected one of"):
        sandbox_policy(RunOptions(workspace=tmp_path), {"sandbox": "loose"})
    with pytest.raises(NormalizeError, match="network"):
        sandbox_policy(RunOptions(workspace=tmp_path), {"network": "yes"})


@pytest.mark.parametrize("layer", ["landlock_tcp",
                                   pytest.param("network_namespace", marks=needs_full)])
def test_each_network_layer_alone_stops_a_connection(layer: str) -> None:
    import socket
    import subprocess
    import sys

    from normalize.sandbox.child import CLONE_NEWNET, CLONE_NEWUSER, ChildPlan

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    ruleset = landlock.Ruleset(landlock.abi_version(), deny_tcp=layer == "landlock_tcp")
    ruleset.allow("/", landlock.ACCESS_READ | landlock.ACCESS_WRITE)
    plan = ChildPlan(unshare=CLONE_NEWUSER | CLONE_NEWNET if layer == "network_namespace" else 0,
                     ruleset_fd=ruleset.fd)
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], preexec_fn=plan.preexec(),
                              capture_output=True, text=True, check=False, timeout=30)
    finally:
        ruleset.close()
        server.settimeout(0.1)
        try:
            server.accept()[0].close()
            accepted = True
        except TimeoutError:
            accepted = False
        server.close()
    assert proc.returncode != 0
    expected = "PermissionError" if layer == "landlock_tcp" else "Network is unreachable"
    assert expected in proc.stderr
    assert not accepted


def test_programs_start_in_the_sandbox_from_many_threads_at_once(ws: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def start(index: int) -> int | None:
        return run_process(["/bin/sh", "-c", f"echo {index} > out{index}"], cwd=ws,
                           timeout=60).exit_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(start, range(32)))
    assert codes == [0] * 32
    assert len(list(ws.glob("out*"))) == 32


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="this system has no /dev/shm")
@needs_full
def test_dev_shm_is_private_and_shared_memory_still_works(ws: Path, tmp_path: Path) -> None:
    mine = Path("/dev/shm") / f"normalize-host-{tmp_path.name}"
    mine.write_text("the host's")
    try:
        policy = SandboxPolicy(mode=SandboxMode.WORKSPACE)
        code, out = sh("ls -a /dev/shm; python3 -c 'import multiprocessing as m; "
                       "m.Lock().acquire(); print(\"locked\")'", ws, policy)
        assert code == 0, out
        assert "locked" in out and mine.name not in out  # the host's files are not there
    finally:
        mine.unlink()
