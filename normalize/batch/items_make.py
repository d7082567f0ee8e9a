"""Making a batch item's task: its workflow with `{item.NAME}`, its own workspace, its limits.

The task's id comes from the batch and the item's position (`manifest.item_id`),
so a batch that resumes finds the task it made before. Its workspace is the
manifest's template with the item's fields: `dir:PATH` (a directory there
already, relative to where the batch started), `clone:REPO` (a fresh clone,
under `copies/ITEM/` in the data home) or `copy` (an isolated copy of the
batch's workspace at its start, made from the shadow store, as an isolated
sub-task's is).
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from normalize.batch.manifest import Manifest
from normalize.errors import UsageError
from normalize.runner import RunOptions, load_spec, start_task, with_model
from normalize.store import TaskStore
from normalize.subtasks.children import ChildSettings
from normalize.task import Task
from normalize.workflow.interpolate import interpolate
from normalize.workflow.spec import WorkflowSpec

CLONE_TIMEOUT = 600.0  # seconds one `git clone` may take


def item_spec(manifest: Manifest, item: dict[str, Any]) -> WorkflowSpec:
    """The workflow with this item's fields as `{item.NAME}` (and the batch's --var, --model)."""
    origin = Path(manifest.origin)
    spec = load_spec(manifest.workflow, origin, {**manifest.variables, "item": item})
    if manifest.model:
        spec.llm = with_model(spec.llm, manifest.model)
    return spec


def item_goal(manifest: Manifest, item: dict[str, Any]) -> str:
    """The item's goal: the batch's, with `{item.NAME}` filled in."""
    try:
        return interpolate(manifest.goal, {**manifest.variables, "item": item})
    except (KeyError, IndexError, TypeError) as exc:
        raise UsageError(f"the goal names {exc} which this item has not") from None


def workspace_for(manifest: Manifest, item: dict[str, Any], item_id: str,
                  store: TaskStore) -> Path:
    """The item's workspace, made when it is a clone or a copy; UsageError naming the item."""
    template = manifest.workspace or "copy"
    try:
        where = interpolate(template, {**manifest.variables, "item": item})
    except (KeyError, IndexError, TypeError) as exc:
        raise UsageError(f"workspace {template!r}: this item has no field {exc}") from None
    kind, _, rest = where.partition(":")
    if kind == "dir":
        path = (Path(manifest.origin) / rest).resolve()
        if not path.is_dir():
            raise UsageError(f"workspace {path}: not a directory")
        return path
    place = store.home / "copies" / item_id
    if kind == "clone":
        return _clone(rest, place)
    return _copy(manifest, place)


def _clone(repo: str, place: Path) -> Path:
    """A fresh clone of `repo` (a URL or a path) under `place`; one made before is kept."""
    from normalize.checkpoints import isolate

    dest = place / (Path(repo.rstrip("/")).stem or "repo")
    if (dest / ".git").is_dir():
        return dest  # cloned by an earlier run of the batch, before its task was made
    isolate.remove_copy(dest)
    place.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = subprocess.run(["git", "clone", "--quiet", "--", repo, str(dest)],
                          capture_output=True, text=True, timeout=CLONE_TIMEOUT, check=False,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        isolate.remove_copy(dest)
        why = (proc.stderr.strip().splitlines() or ["git clone failed"])[-1]
        raise UsageError(f"clone {repo}: {why}")
    return dest


def _copy(manifest: Manifest, place: Path) -> Path:
    """An isolated copy of the batch's workspace as it was when the batch started."""
    from normalize.checkpoints import isolate
    from normalize.checkpoints.shadow import ShadowRepo

    origin = Path(manifest.origin)
    dest = place / origin.name
    isolate.remove_copy(dest)  # one half made before a crash
    isolate.make_copy(ShadowRepo(origin, place.parent.parent), manifest.base, dest)
    return dest


def base_tree(origin: Path, home: Path) -> str:
    """The tree of `origin` now, in the shadow store: what every item's copy starts from."""
    from normalize.checkpoints.shadow import ShadowRepo

    return ShadowRepo(origin, home).snapshot().tree


def make_item(manifest: Manifest, position: int, item_id: str, options: RunOptions,
              store: TaskStore, budget: float | None) -> Task:
    """Create the item's task in the store (its workspace made first)."""
    item = manifest.items[position]
    spec = item_spec(manifest, item)
    workspace = workspace_for(manifest, item, item_id, store)
    limits = replace(spec.limits)
    if budget is not None:
        limits.max_cost_usd = budget
    options.workspace = workspace
    if manifest.output_schema:  # (read again: the file was checked as the batch started)
        from normalize.structured import load_contract

        options.output = load_contract(Path(manifest.output_schema))
    settings = ChildSettings(key=f"item {position}", origin=manifest.origin,
                             isolated=not manifest.workspace.startswith("dir:"), merge="none",
                             base=manifest.base)
    return start_task(spec, item_goal(manifest, item), options, limits=limits,
                      task_id=item_id, parent=manifest.batch, child=settings)
