"""`launch(request)`: the one way every launching command starts (run, agent, resume, batch).

The request is checked first (its table of flag rules, `requests.py`), then handed
to the module of its kind, imported there and only there: this is the command
boundary where laziness lives (a done task's `resume` never loads the agent's
model machinery, `--help` loads none of it). `app.py` imports this module
inside each launching command's body.
"""

from __future__ import annotations

from normalize.cli.console import Environment, fail
from normalize.cli.requests import Agent as Agent  # (the requests a body builds, from here)
from normalize.cli.requests import Batch as Batch
from normalize.cli.requests import Launch
from normalize.cli.requests import Resume as Resume
from normalize.cli.requests import Run as Run
from normalize.errors import NormalizeError


def launch(env: Environment, request: Launch) -> int:
    """Check `request`, run it to its end; the exit status."""
    try:
        request.check()
        return _dispatch(env, request)
    except NormalizeError as exc:
        return fail(env, exc)


def _dispatch(env: Environment, request: Launch) -> int:
    match request:
        case Run():
            from normalize.cli import commands

            return _then_commit(env, commands.run_workflow(env, request), request.commit,
                                request.json_output)
        case Agent(items=str()):
            from normalize.cli import batching

            return batching.agent_items(env, request)
        case Agent():
            from normalize.cli import agent

            return _then_commit(env, agent.launch_agent(env, request), request.commit,
                                request.json_output)
        case Resume():
            return _resume(env, request)
        case Batch():
            from normalize.cli import batching

            return batching.batch_start(env, request)
    raise TypeError(f"not a request: {request!r}")


def _resume(env: Environment, request: Resume) -> int:
    """`resume ID|last`: a task goes on; a batch's parent collects, re-attaches and submits its
    items; `--store URL`: the task's record is brought here first (the batch machinery and the
    store's load only then)."""
    from normalize.cli import commands

    if request.store is None:
        ref = commands.last_here(env, request.json_output) if request.task == "last" \
            else request.task
        task, batch = commands.batch_of(ref)
        if not batch:
            return commands.resume_task(env, request, task)
    from normalize.cli import batching

    if request.store is not None:  # (a batch's parent is refused from a store, for now)
        task = batching.from_record(request.store, request.task)
        return commands.resume_task(env, request, task)
    return batching.resume_batch(env, task, json_output=request.json_output,
                                 quiet=request.quiet, otel=request.otel)


def _then_commit(env: Environment, code: int, commit: bool, json_output: bool) -> int:
    """After a done task, `--commit` makes its branch (`normalize commit ID`)."""
    if not commit or code != 0 or env.task_id is None:
        return code
    from normalize.cli.commit import commit_branch

    return commit_branch(env, env.task_id, branch=None, message=None, push=None,
                         no_verify=False, json_output=False, to_stderr=json_output)
