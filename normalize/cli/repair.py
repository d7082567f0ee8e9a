"""`normalize tasks repair`: move damaged task files aside, each under its task's lock.

Listing and showing tasks only read the store; this is the one command (with
`resume`) that moves a damaged file out of the way.
"""

from __future__ import annotations

from normalize.cli.console import Environment, fail
from normalize.errors import ExitStatus, NormalizeError, SchemaVersionError


def repair_tasks(env: Environment, ref: str | None = None) -> int:
    """Move aside the damaged task files (all, or the one `ref` names); say what moved."""
    from normalize.store import TaskStore

    store = TaskStore()
    try:
        ids = [store.resolve(ref)] if ref else store.ids()
    except NormalizeError as exc:
        return fail(env, exc)
    moved = 0
    status = int(ExitStatus.DONE)
    for task_id in ids:
        try:
            store.load(task_id, with_config=True)
            continue  # readable: nothing to repair
        except SchemaVersionError:
            continue  # written by a newer normalize: not damaged, left alone
        except NormalizeError:
            pass
        try:
            aside = store.repair(task_id)
        except NormalizeError as exc:
            status = fail(env, exc)
            continue
        if aside is not None:
            moved += 1
            env.stdout.write(f"moved {store.task_path(task_id).name} aside to {aside.name}\n")
    if not moved and status == int(ExitStatus.DONE):
        env.stdout.write("no damaged task files\n")
    return status
