"""Which sandbox tier this machine gives, found by starting a confined `true` in each.

The `full` tier is tried first; where it cannot start a program (user
namespaces disabled, a container's seccomp profile refusing `unshare`,
Ubuntu's AppArmor restriction refusing `mount` inside the namespace) the
`landlock` tier is tried; where neither starts one there is no sandbox. The
verdict says what the tier enforces and what it does not, one short line each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from normalize import faults
from normalize.programs import trusted_program
from normalize.sandbox import landlock, seccomp, verdict
from normalize.sandbox.policy import SandboxPolicy, SandboxTier

__all__ = ["Probe", "probe"]


@dataclass(frozen=True)
class Probe:
    """The verdict: the tier programs run in, what it enforces and what not, or why none."""

    available: bool
    landlock_abi: int = 0
    filesystem: str = ""
    network: str = ""
    reason: str = ""
    """Why there is no sandbox; in the landlock tier, why there is no full one."""
    tier: SandboxTier = SandboxTier.NONE
    enforced: tuple[str, ...] = ()
    not_enforced: tuple[str, ...] = ()

    def notice(self) -> str:
        """One line naming what is weaker than the full tier ('' in the full tier; what both
        tiers' write guard leaves is said by `sandbox check`, not at every run)."""
        if self.tier is not SandboxTier.LANDLOCK:
            return ""
        weaker = "; ".join(line for line in self.not_enforced if line not in _GUARD_GAPS)
        return (f"sandbox tier landlock (no namespaces here), weaker than full: {weaker} "
                f"(`normalize sandbox check` says more)")


def probe(*, fresh: bool = False) -> Probe:
    """What can be enforced here: once per process, and kept between runs while nothing that
    decides it changed (`normalize.sandbox.verdict`); `fresh` tries again whatever was kept."""
    if faults.sandbox_disabled():
        return Probe(False, reason="the sandbox was disabled for a test (NORMALIZE_NO_SANDBOX)")
    if fresh:
        _probe.cache_clear()
    return _probe(fresh)


@cache
def _probe(fresh: bool = False) -> Probe:
    if not sys.platform.startswith("linux"):
        return Probe(False, reason=f"the sandbox needs Linux Landlock; this system is "
                                   f"{sys.platform} (no Seatbelt support yet)")
    abi = landlock.abi_version()
    now = verdict.key(abi, seccomp.arch())
    kept = None if fresh else _from_fields(verdict.load(now))
    if kept is None:
        kept = _tried(abi)
        verdict.keep(now, asdict(kept))
    return kept


def _from_fields(fields: dict[str, Any] | None) -> Probe | None:
    """The `Probe` a kept verdict's fields make, or None when they make none."""
    if fields is None:
        return None
    try:
        return Probe(**{**fields, "tier": SandboxTier(fields["tier"]),
                        "enforced": tuple(str(line) for line in fields["enforced"]),
                        "not_enforced": tuple(str(line) for line in fields["not_enforced"])})
    except (KeyError, TypeError, ValueError):
        return None


def _tried(abi: int) -> Probe:
    """The verdict of the trial runs (`true` confined in each tier, the full one first)."""
    if abi < 1:
        return Probe(False, reason="the kernel has no Landlock (too old, or disabled at boot)")
    full = _trial(abi, SandboxTier.FULL)
    if not full:
        return _full(abi)
    if seccomp.arch() is None:
        return Probe(False, abi, reason=f"{full}; and no seccomp filter is built for this "
                                        f"machine ({os.uname().machine})")
    filtered = _trial(abi, SandboxTier.LANDLOCK)
    if not filtered:
        return _filtered(abi, full)
    return Probe(False, abi, reason=f"{full}; without namespaces: {filtered}")


def _full(abi: int) -> Probe:
    network = "network namespace (no interfaces)"
    if abi >= 4:
        network += " + Landlock TCP bind/connect rules"
    enforced = (
        f"writes: the workspace and a temporary directory per program (Landlock ABI {abi})",
        "reads: everywhere but the credential stores and normalize's data and config",
        _GUARDED,
        ".git and .normalize that exist at the start: also bind-mounted read-only (user+mount "
        "namespace), and fingerprinted around each action, as a last-resort detector",
        f"network: {network}",
        "processes: PID 1 of a PID namespace kills whatever a program leaves running",
        "terminal: /dev/tty, /dev/pts, /dev/ptmx and the consoles unreachable",
        "sockets: /tmp, /run and $XDG_RUNTIME_DIR empty; agent variables (SSH_AUTH_SOCK, "
        "DOCKER_HOST, …) scrubbed",
        "/dev/shm: a private tmpfs per program",
        "/proc: a PID namespace's own; no CAP_SYS_PTRACE, CAP_SYS_ADMIN or CAP_PERFMON "
        "for programs run as root",
        *_scoped(abi),
    )
    return Probe(True, abi, filesystem=f"Landlock ABI {abi}; .git and .normalize bind-mounted "
                                       f"read-only in a user+mount namespace",
                 network=network, tier=SandboxTier.FULL, enforced=enforced,
                 not_enforced=("a pathname unix socket under HOME (outside the hidden "
                               "directories) or /var can be connected: Landlock governs no "
                               "connect",
                               *_GUARD_GAPS,
                               "run as root, the guard makes an allowed change with normalize's "
                               "rights, wider than the user namespace maps (a file of another "
                               "uid in the workspace, an owner of any uid)",
                               *_unscoped(abi)))


def _filtered(abi: int, why: str) -> Probe:
    if abi >= 4:
        network = ("Landlock TCP bind/connect rules; seccomp refuses UDP, raw, netlink, packet "
                   "and unix sockets")
    else:
        network = "seccomp refuses every socket (Landlock ABI < 4 has no TCP rules)"
    enforced = (
        f"writes: the workspace and a temporary directory per program (Landlock ABI {abi})",
        "reads: everywhere but the credential stores and normalize's data and config",
        f"network: {network}",
        "unix sockets: socket(AF_UNIX) refused (one outside cannot be told from one inside); "
        "socketpair works",
        "devices: only null, zero, full, random, urandom and shm; no terminal (/dev/pts, "
        "/dev/ptmx, /dev/tty), so no pty either",
        "syscalls: seccomp refuses unshare, setns, namespace clones, mount, ptrace, keyctl, "
        "bpf, io_uring, perf_event_open, open_by_handle_at, TIOCSTI and TIOCLINUX",
        "state: a data home or config dir inside the workspace is refused at start",
        "processes: a subreaper kills whatever a program leaves running, when it ends and at "
        "a timeout or cancel",
        _GUARDED,
        ".git and .normalize: also fingerprinted around each action, as a last-resort detector",
        "/proc: no program reads another's environ, maps, mem, cwd, root, exe or fd links "
        "but its own sandbox's, normalize's included (Landlock's ptrace rule; "
        "CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON dropped for programs run as root)",
        "temporary directories: every task's TMPDIR hidden from every other program",
        *_scoped(abi),
    )
    weaker = (
        *_GUARD_GAPS,
        "/dev/shm is shared with your other programs",
        "/proc lists every process: of another, a program reads its command line, status, "
        "stat and comm and how many descriptors it holds (refusing that would send every "
        "open, reads too, through the write guard)",
        "if the subreaper itself is killed, processes a program moved to another group survive",
        *_unscoped(abi),
    )
    return Probe(True, abi, filesystem=f"Landlock ABI {abi}; no namespaces",
                 network=network, reason=why, tier=SandboxTier.LANDLOCK, enforced=enforced,
                 not_enforced=weaker)


_GUARDED = (".git (at any depth, any spelling, a new one too, and a directory holding one "
            "moved), .normalize and the hidden places: every change refused at the call by "
            "normalize's write guard (seccomp user notification; normalize makes the change, "
            "an open's descriptor handed over whole)")
_GUARD_GAPS = (
    "each path change is a round trip through normalize's write guard (about 0.1-0.3 ms)",
    "a file hard-linked to a protected one before the program started can be changed "
    "through its other name; ACLs, file capabilities, security labels and chattr flags are "
    "refused everywhere (normalize would set them with its own rights)",
)


def _scoped(abi: int) -> tuple[str, ...]:
    if abi < 6:
        return ()
    return ("signals and abstract unix sockets: only within the sandbox (Landlock ABI 6)",)


def _unscoped(abi: int) -> tuple[str, ...]:
    if abi >= 6:
        return ()
    return ("signals can reach your other processes (Landlock ABI < 6 cannot scope them)",)


def _trial(abi: int, tier: SandboxTier) -> str:
    """Start `true` confined in `tier`; the reason it failed, or ''."""
    import tempfile  # a trial runs once per machine (the verdict is kept): not at import

    from normalize.sandbox.confinement import confine

    program = trusted_program("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="normalize-probe-") as workspace:
        os.mkdir(os.path.join(workspace, ".git"))
        try:
            confinement = confine(SandboxPolicy(), workspace, abi=abi, label="probe", tier=tier)
        except OSError as exc:
            return f"the sandbox could not be prepared ({exc.strerror or exc})"
        try:
            code = subprocess.run([program], cwd=workspace, env=confinement.env,
                                  preexec_fn=confinement.preexec,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, check=False, timeout=10).returncode
        except (OSError, subprocess.SubprocessError):
            why = confinement.refusal()  # the set-up step that failed and its error
            return f"{_CANNOT_START[tier]} ({why})" if why else _CANNOT_START[tier]
        finally:
            confinement.close()
    return "" if code == 0 else f"a confined `true` exited with status {code}"


_CANNOT_START = {
    SandboxTier.FULL: "namespaces: a confined program could not start: user namespaces are "
                      "disabled here, or a container or AppArmor forbids unshare or mount",
    SandboxTier.LANDLOCK: "a program could not start under Landlock and a seccomp filter",
}
