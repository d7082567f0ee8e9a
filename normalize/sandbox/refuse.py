"""Fail closed: the runs the sandbox cannot keep to their permissions are refused at start.

Both checks take plain values (the run's `SandboxPolicy`, its approval mode,
the workspace and the data home), so the runner asks them once, before any
task or program exists, and a refusal is one line naming what to change.
"""

from __future__ import annotations

import os
from pathlib import Path

from normalize.errors import UsageError
from normalize.homes import config_home
from normalize.sandbox.policy import SandboxMode, SandboxPolicy, SandboxTier
from normalize.sandbox.tiers import probe

__all__ = ["refuse_state_in_workspace", "refuse_unconfined"]


def refuse_unconfined(sandbox: SandboxPolicy, approve: str, interactive: bool) -> None:
    """A `UsageError` when programs could run unconfined with no person to ask."""
    if sandbox.mode is SandboxMode.OFF or approve == "never" or (approve == "ask" and interactive):
        return
    found = probe()
    if not found.available:
        raise UsageError(f"the sandbox is unavailable ({found.reason}); programs would run "
                         f"unconfined, so this run is refused; pass --sandbox off to run "
                         f"them anyway")


def refuse_state_in_workspace(sandbox: SandboxPolicy, workspace: Path, store: Path) -> None:
    """A `UsageError` when the landlock tier would leave normalize's state to programs.

    Landlock cannot take a subtree out of the writable workspace, so a data
    home or config dir inside it would be readable and writable by every
    program; the full tier hides them with a mount instead.
    """
    if sandbox.mode is not SandboxMode.WORKSPACE:
        return
    root = workspace.resolve()
    inside = [(name, path) for name, path in _state_dirs(store)
              if path.resolve() == root or root in path.resolve().parents]
    if inside and probe().tier is SandboxTier.LANDLOCK:
        name, path = inside[0]
        raise UsageError(f"{name}: {path} is inside the workspace, and the landlock sandbox tier "
                         f"(no namespaces here) cannot hide it from programs; set {name} to a "
                         f"directory outside {root}")


def _state_dirs(store: Path) -> list[tuple[str, Path]]:
    """normalize's data home and config dir, each with the variable that sets it."""
    data = "NORMALIZE_HOME" if os.environ.get("NORMALIZE_HOME") else "XDG_DATA_HOME"
    config = ("NORMALIZE_CONFIG" if os.environ.get("NORMALIZE_CONFIG")
              else "NORMALIZE_HOME" if os.environ.get("NORMALIZE_HOME") else "XDG_CONFIG_HOME")
    return [(data, store), (config, config_home())]
