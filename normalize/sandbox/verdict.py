"""The sandbox tier's verdict kept between runs, keyed on what decides it.

Finding the tier starts a confined `true` in each tier it tries (about 30 ms,
at every start that reports the tier). The verdict is kept in the data home
(`cache/sandbox-tier.json`, owner-only) beside the key it was found under,
and used only while the key is the same: the kernel (release, build, boot),
the user (uid, user and mount namespaces: another container is another key),
Landlock's ABI, the machine for the seccomp filter, the sysctls that allow or
forbid unprivileged user namespaces (also AppArmor's), and normalize itself
(its version and its sandbox code's files). Any change is a new trial.

A verdict that is wrong in the "available" direction cannot widen anything:
each program is confined as it starts, and a mechanism that fails then stops
the program from starting (fail closed); `normalize sandbox check` always
tries afresh and keeps what it found.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from normalize.homes import data_home

NAME = "sandbox-tier.json"
SYSCTLS = ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
           "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
           "/proc/sys/kernel/random/boot_id")
NAMESPACES = ("/proc/self/ns/user", "/proc/self/ns/mnt")


def path() -> Path:
    return data_home() / "cache" / NAME


def key(abi: int, arch: str | None) -> dict[str, Any]:
    """What decides the verdict, as it is now (see the module docstring)."""
    uname = os.uname()
    package = sys.modules.get("normalize")  # (loaded: this is one of its subpackages)
    return {"release": uname.release, "build": uname.version, "uid": os.getuid(),
            "landlock": abi, "arch": arch, "normalize": getattr(package, "__version__", None),
            "code": _code_stamp(), "sysctl": [_read(name) for name in SYSCTLS],
            "ns": [_inode(name) for name in NAMESPACES]}


def load(now: dict[str, Any]) -> dict[str, Any] | None:
    """The kept verdict's fields when it was found under `now`, else None (a trial is due)."""
    try:
        kept = json.loads(path().read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != now:
        return None
    found = kept.get("verdict")
    return found if isinstance(found, dict) else None


def keep(now: dict[str, Any], found: dict[str, Any]) -> None:
    """Keep the verdict's fields under `now`, owner-only, replaced atomically, in an existing
    data home; best effort."""
    from normalize.fsutil import atomic_write, json_bytes, private_dirs

    target = path()
    if not target.parent.parent.is_dir():
        return  # no data home yet: a start that fails before making one leaves nothing
    with contextlib.suppress(OSError):
        private_dirs(target.parent)
        atomic_write(target, json_bytes({"key": now, "verdict": found}), fsync=False,
                     mode=0o600)


def _code_stamp() -> list[list[Any]]:
    """The sandbox package's files as they are (a development tree changes without a new
    version)."""
    here = Path(__file__).parent
    with os.scandir(here) as scan:
        return sorted([entry.name, entry.stat().st_mtime_ns, entry.stat().st_size]
                      for entry in scan if entry.name.endswith(".py"))


def _read(name: str) -> str | None:
    try:
        with open(name, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _inode(name: str) -> int | None:
    try:
        return os.stat(name).st_ino
    except OSError:
        return None
