"""Workspace checkpoints: what a task changed, and taking it back (issue 15).

After every side-effecting action the workspace's content is recorded in a
shadow git store of normalize's own (`shadow.py`), as a step on the task's
ref (`record.py`); `changes.py` reads steps back as diffs and plans what to
restore (`normalize diff`, `undo`, `resume --rewind`), `restore.py` writes it
back race-free and journaled; `locks.py` clears git locks a dead process
left; `report.py` renders a task's self-contained HTML report and
`reportfile.py` says where it is written.
"""

from normalize.checkpoints.record import WorkspaceCheckpoints, WorkspaceStep, read_steps
from normalize.checkpoints.shadow import CheckpointError, Settings, ShadowRepo

__all__ = [
           "CheckpointError",
           "Settings",
           "ShadowRepo",
           "WorkspaceCheckpoints",
           "WorkspaceStep",
           "read_steps",
]
