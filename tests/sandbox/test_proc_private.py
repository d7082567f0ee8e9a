"""What a program reads of other processes through /proc: no environment but its own.

Landlock lets a program reach (ptrace, and so `/proc/PID/environ`, `maps`, `mem`,
the `cwd` and `fd` links)
only processes of its own domain; a program run as root would pass that with
CAP_SYS_PTRACE, CAP_SYS_ADMIN or CAP_PERFMON, which it no longer holds. So
neither normalize, nor the reapers it forks (which carry its environment), nor
another process of the person is readable. Run as this user, and as `nobody`
when the test runs as root, in both tiers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import FULL_TIER

TIERS = ["landlock", "full"] if FULL_TIER else ["landlock"]
NOBODY = 65534

SNOOP = r'''
import json, os, sys
def one(path, link=False):
    try:
        if link:
            return "read " + os.readlink(path)
        found = open(path, "rb").read()
        return "SECRET" if b"proc-private-secret" in found else "read"
    except OSError as exc:
        return exc.strerror
def look(pid):
    seen = {name: one(f"/proc/{pid}/{name}") for name in ("environ", "maps", "mem")}
    seen.update({name: one(f"/proc/{pid}/{name}", link=True) for name in ("cwd", "fd/0")})
    seen["cmdline"] = one(f"/proc/{pid}/cmdline")  # said, not hidden: no secret rides argv
    return seen
chain = {}
pid = os.getppid()
while pid >= 1:  # up the chain, while the processes are this user's
    status = open(f"/proc/{pid}/status").read()
    if int(status.split("\nUid:")[1].split()[0]) != os.getuid():
        break
    chain[pid] = look(pid)
    pid = int(status.split("\nPPid:")[1].split()[0])
print(json.dumps({"chain": chain, "sibling": look(int(sys.argv[1]))}))
'''

NORMALIZE = r'''
import json, os, subprocess, sys
from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock
ws = sys.argv[2]
confinement = confine(SandboxPolicy(), ws, abi=landlock.abi_version(), label="proc",
                      tier=SandboxTier(sys.argv[1]))
try:
    proc = subprocess.run([sys.executable, "-c", sys.argv[3], sys.argv[4]], cwd=ws,
                          env=confinement.env,
                          preexec_fn=confinement.preexec, capture_output=True, text=True)
finally:
    confinement.close()
print(proc.stdout or proc.stderr)
'''


def _python() -> str:
    """An interpreter `nobody` can run (the venv's may lie in root's home)."""
    for path in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(path) and subprocess.run(
                [path, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                capture_output=True, check=False).returncode == 0:
            return path
    pytest.skip("no system python 3.11+ for the unprivileged user")


def _as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


USERS = ["self", "nobody"] if os.geteuid() == 0 else ["self"]


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("tier", TIERS)
def test_no_program_reads_the_environment_of_normalize_or_a_sibling(tier: str,
                                                                    user: str) -> None:
    ws = Path(tempfile.mkdtemp(prefix="nz-proc-"))  # pytest's base is root's own, 0700
    if user == "nobody":
        os.chown(ws, NOBODY, NOBODY)
    sibling = subprocess.Popen(["sleep", "60"], env={"SIB": "proc-private-secret"},
                               preexec_fn=_as_nobody if user == "nobody" else None)
    try:
        seen = _snoop(ws, tier, user, sibling.pid)
    finally:
        sibling.kill()
        sibling.wait()
        shutil.rmtree(ws, ignore_errors=True)
    # landlock: the subreaper and normalize; full: the namespace's PID 1 (forked by normalize)
    assert len(seen["chain"]) >= (2 if tier == "landlock" else 1), seen
    private = ("environ", "maps", "mem", "cwd", "fd/0")
    for pid, files in seen["chain"].items():
        assert all(files[name] == "Permission denied" for name in private), (pid, files)
    hidden = "Permission denied" if tier == "landlock" else "No such file or directory"
    # (the full tier's PID namespace shows no other)
    assert all(seen["sibling"][name] == hidden for name in private), seen
    # what `sandbox check` says the landlock tier leaves visible: command lines
    shown = "read" if tier == "landlock" else "No such file or directory"
    assert seen["sibling"]["cmdline"] == shown, seen


def _snoop(ws: Path, tier: str, user: str, sibling: int) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ws),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "ANTHROPIC_API_KEY": "proc-private-secret", "TMPDIR": str(ws)}
    nobody = user == "nobody"
    proc = subprocess.run([_python() if nobody else sys.executable, "-c", NORMALIZE, tier,
                           str(ws), SNOOP, str(sibling)], env=env, cwd=ws,
                          preexec_fn=_as_nobody if nobody else None, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen


@pytest.mark.skipif(os.geteuid() != 0, reason="capabilities matter to a program run as root")
@pytest.mark.parametrize("tier", TIERS)
def test_a_program_run_as_root_holds_no_ptrace_or_admin_capability(tmp_path: Path,
                                                                    tier: str) -> None:
    from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock

    confinement = confine(SandboxPolicy(), tmp_path, abi=landlock.abi_version(), label="caps",
                          tier=SandboxTier(tier))
    try:
        proc = subprocess.run(["grep", "^Cap", "/proc/self/status"], cwd=tmp_path,
                              env=confinement.env, preexec_fn=confinement.preexec,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        confinement.close()
    caps = {line.split(":")[0]: int(line.split()[1], 16) for line in proc.stdout.splitlines()}
    assert set(caps) >= {"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"}, proc
    dropped = 1 << 19 | 1 << 21 | 1 << 38  # SYS_PTRACE, SYS_ADMIN, PERFMON: each reads environ
    assert all(not value & dropped for value in caps.values()), caps
