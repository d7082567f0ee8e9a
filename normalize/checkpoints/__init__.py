"""Workspace checkpoints: what a task changed, and taking it back (issue 15).

After every side-effecting action the workspace's content is recorded in a
shadow git store of normalize's own (`shadow.py`), as a step on the task's
ref (`record.py`); `changes.py` reads steps back as diffs and restores files
(`normalize diff`, `undo`, `resume --rewind`); `report.py` writes a task's
self-contained HTML report.
"""

from normalize.checkpoints.record import Step, WorkspaceCheckpoints, read_steps
from normalize.checkpoints.shadow import CheckpointError, Settings, ShadowRepo

__all__ = ["CheckpointError", "Settings", "ShadowRepo", "Step", "WorkspaceCheckpoints",
           "read_steps"]
