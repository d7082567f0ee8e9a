"""The sandbox settings as plain data: the mode and what passes through."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["SandboxMode", "SandboxPolicy", "SandboxTier"]


class SandboxMode(StrEnum):
    """What a program may write: the workspace, nothing, or anything (`off`)."""

    WORKSPACE = "workspace"
    READ_ONLY = "read-only"
    OFF = "off"


class SandboxTier(StrEnum):
    """How this machine confines programs: namespaces and Landlock, Landlock and seccomp, or not."""

    FULL = "full"
    LANDLOCK = "landlock"
    NONE = "none"


@dataclass(frozen=True)
class SandboxPolicy:
    """The boundary for programs: writable area, network, environment passed through.

    `hidden` names more paths no program may read (normalize's own data and
    config directories), beside the credential stores under HOME. `network`
    true is every host; otherwise `hosts`, when given, are the only ones
    programs reach (through normalize's proxy), and `hosts_ask` says a
    workspace file chose them, so they ask in auto as `network` does.
    `writable` names more directories programs may write (a harness's own
    session home, kept between its turns), outside the workspace.
    """

    mode: SandboxMode = SandboxMode.WORKSPACE
    network: bool = False
    hosts: tuple[str, ...] = ()
    hosts_ask: bool = False
    env_allow: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
