"""What a program normalize starts may touch: the sandbox settings every run carries.

`SandboxPolicy` is plain data (it travels in `ToolContext` and is resolved from
the command line, the user's config and the workflow's permissions). The
mechanism that enforces it lives beside it in this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["SandboxMode", "SandboxPolicy"]


class SandboxMode(StrEnum):
    """What a program may write: the workspace, nothing, or anything (`off`)."""

    WORKSPACE = "workspace"
    READ_ONLY = "read-only"
    OFF = "off"


@dataclass(frozen=True)
class SandboxPolicy:
    """The boundary for programs: writable area, network, environment passed through."""

    mode: SandboxMode = SandboxMode.WORKSPACE
    network: bool = False
    env_allow: tuple[str, ...] = ()
