"""`normalize commit`: a branch in the person's repository with a task's net change."""

from __future__ import annotations

import json

from normalize.cli.console import Environment, fail
from normalize.errors import NormalizeError


def commit_branch(env: Environment, ref: str, *, branch: str | None, message: str | None,
                  push: str | None, no_verify: bool, json_output: bool,
                  to_stderr: bool = False) -> int:
    """Make the branch, say its name and commit (and where it was pushed).

    `to_stderr`: after a `--json` run, whose stdout is the event stream.
    """
    from normalize.checkpoints.commit import commit_task
    from normalize.contract.driver import driver_traits
    from normalize.redact import inert
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        task = store.load(store.resolve(ref))
        result = commit_task(store, task, branch=branch, message=message, push=push,
                             no_verify=no_verify,  # a model wrote the summary, or the engine
                             summary_is_prose=bool(driver_traits(task.driver).model_settings))
    except NormalizeError as exc:
        return fail(env, exc)
    if json_output:
        env.stdout.write(json.dumps({"task": task.id, "branch": result.branch,
                                     "commit": result.commit, "base": result.base,
                                     "files": result.files, "pushed": result.pushed}) + "\n")
        return 0
    count = len(result.files)
    out = env.stderr if to_stderr else env.stdout
    out.write(f"branch {inert(result.branch)} at {result.commit[:12]}: task {task.id}, "
                     f"{count} file{'s' if count != 1 else ''}\n")
    if result.pushed is not None:
        out.write(f"pushed {inert(result.branch)} to {inert(result.pushed)}\n")
    return 0
