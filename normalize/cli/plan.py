"""`normalize run --dry-run`: the plan of a workflow, variables resolved, nothing run."""

from __future__ import annotations

from pathlib import Path

from normalize.cli.console import Environment
from normalize.workflow.spec import WorkflowSpec


def print_plan(env: Environment, spec: WorkflowSpec, goal: str,
               workspace: Path | None = None) -> None:
    """Write the plan (see `normalize.workflow.plan.describe`) to stdout."""
    from normalize.workflow.plan import describe

    for line in describe(spec, goal, workspace):
        env.stdout.write(line + "\n")


def print_plan_json(env: Environment, spec: WorkflowSpec, goal: str,
                    workspace: Path | None = None) -> None:
    """`--dry-run --json`: the plan as one JSON object (the spec, and the plan's lines)."""
    import json

    from normalize.workflow.plan import describe

    env.stdout.write(json.dumps({"dry_run": True, "goal": goal, "spec": spec.to_dict(),
                                 "plan": describe(spec, goal, workspace)}) + "\n")
