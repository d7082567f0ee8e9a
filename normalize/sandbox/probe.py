"""What the sandbox can enforce on this machine, found by trying it once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache

from normalize import faults
from normalize.sandbox import landlock
from normalize.sandbox.policy import SandboxPolicy

__all__ = ["Probe", "probe"]


@dataclass(frozen=True)
class Probe:
    """The verdict: whether programs can be confined, by what, or why not."""

    available: bool
    landlock_abi: int = 0
    filesystem: str = ""
    network: str = ""
    reason: str = ""


def probe() -> Probe:
    """What can be enforced here; the trial run happens once per process."""
    if faults.sandbox_disabled():
        return Probe(False, reason="the sandbox was disabled for a test (NORMALIZE_NO_SANDBOX)")
    return _probe()


@cache
def _probe() -> Probe:
    if not sys.platform.startswith("linux"):
        return Probe(False, reason=f"the sandbox needs Linux Landlock; this system is "
                                   f"{sys.platform} (no Seatbelt support yet)")
    abi = landlock.abi_version()
    if abi < 1:
        return Probe(False, reason="the kernel has no Landlock (too old, or disabled at boot)")
    failure = _trial(abi)
    if failure:
        return Probe(False, abi, reason=failure)
    network = "network namespace (no interfaces)"
    if abi >= 4:
        network += " + Landlock TCP bind/connect rules"
    return Probe(True, abi, filesystem=f"Landlock ABI {abi}; .git and .normalize bind-mounted "
                                       f"read-only in a user+mount namespace",
                 network=network)


def _trial(abi: int) -> str:
    """Start `true` under the full confinement; the reason it failed, or ''."""
    from normalize.sandbox.confine import confine

    program = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="normalize-probe-") as workspace:
        os.mkdir(os.path.join(workspace, ".git"))
        try:
            confinement = confine(SandboxPolicy(), workspace, abi=abi, label="probe")
        except OSError as exc:
            return f"Landlock refused the ruleset ({exc.strerror or exc})"
        try:
            code = subprocess.run([program], cwd=workspace, env=confinement.env,
                                  preexec_fn=confinement.preexec,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, check=False, timeout=10).returncode
        except (OSError, subprocess.SubprocessError):
            return ("a confined program could not start (user namespaces are disabled here, "
                    "or a container forbids unshare/mount)")
        finally:
            confinement.close()
    return "" if code == 0 else f"a confined `true` exited with status {code}"
