"""Starting a batch (its manifest and its parent task) and opening one to resume or watch."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.batch.items_make import base_tree, item_spec
from normalize.batch.manifest import BatchFiles, BatchLimits, Manifest, check_workspace
from normalize.errors import UsageError
from normalize.execution.executor import Connecting, Executor
from normalize.runner import RunOptions
from normalize.store import TaskStore
from normalize.task import Limits, Task, TaskStatus, new_task_id

EXECUTORS = ("local", "ray")


@dataclass
class BatchRequest:
    """What the person asked for (`normalize batch …`, `normalize agent --items …`)."""

    workflow: str
    items: list[dict[str, Any]]
    goal: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    workspace: str | None = None  # overrides the workflow's `workspace`
    executor: str = "local"
    address: str = ""
    limits: BatchLimits = field(default_factory=BatchLimits)
    on_item_error: str | None = None  # overrides the workflow's
    flags: tuple[str, ...] = ()  # what each item's run is given
    store: str = ""  # the URL to publish the batch to (empty: none)
    output_schema: str = ""  # the schema file each item's result must meet


def workflow_hash(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def start_batch(request: BatchRequest, options: RunOptions, store: TaskStore) -> Manifest:
    """Check the request, write the batch's manifest and create its parent task."""
    if request.executor not in EXECUTORS:
        raise UsageError(f"--executor {request.executor}: unknown (choose from "
                         f"{', '.join(EXECUTORS)})")
    origin = options.workspace.resolve()
    batch = new_task_id()
    probe = Manifest(batch, request.workflow, "", request.goal, str(origin), request.items,
                     variables=request.variables, model=request.model)
    spec = item_spec(probe, request.items[0])  # a bad workflow is refused before a batch exists
    template = request.workspace if request.workspace is not None else spec.workspace
    where = "--workspace" if request.workspace is not None else spec.path
    check_workspace(template, where)
    if request.store and template.startswith("dir:"):
        raise UsageError(f"{where}: workspace {template!r} cannot go with --store "
                         f"{request.store}: a directory on one machine is not on another; "
                         "use clone:REPO (each item clones where it runs) or copy")
    schema = _schema(request.output_schema, spec.driver)
    limits = request.limits
    limits.on_item_error = request.on_item_error or spec.on_item_error  # type: ignore[assignment]
    if limits.on_item_error not in ("continue", "stop"):
        raise UsageError(f"--on-item-error {limits.on_item_error}: choose continue or stop")
    manifest = Manifest(batch, spec.path, workflow_hash(spec.path),
                        request.goal or spec.description or spec.name, str(origin),
                        request.items, workspace=template, executor=request.executor,
                        address=request.address, flags=request.flags,
                        variables=request.variables, model=request.model, limits=limits,
                        store=request.store, output_schema=schema)
    if template in ("", "copy"):
        manifest.base = base_tree(origin, store.home)
    BatchFiles(store.home, batch, fsync=store.fsync).write_manifest(manifest)
    parent = Task(id=batch, goal=f"batch: {manifest.goal} ({len(request.items)} items)",
                  workspace=str(origin), driver="batch", workflow=spec.path,
                  limits=Limits(max_cost_usd=limits.budget), status=TaskStatus.PENDING)
    store.create(parent)
    return manifest


def _schema(path: str, driver: str) -> str:
    """`--output-schema`, checked before the batch exists; its absolute path (or "")."""
    if not path:
        return ""
    from normalize.contract.driver import driver_traits
    from normalize.structured import load_contract

    if not driver_traits(driver).checks_output:
        raise UsageError(f"--output-schema {path}: needs a workflow a model drives "
                         f"(this one's driver is {driver})")
    load_contract(Path(path))
    return str(Path(path).resolve())


def open_batch(store: TaskStore, batch: str) -> Manifest:
    """The manifest of the batch `batch` (an id or a prefix); refused if its workflow changed."""
    manifest = BatchFiles(store.home, store.resolve(batch)).manifest()
    if manifest.workflow_hash and workflow_hash(manifest.workflow) != manifest.workflow_hash:
        raise UsageError(f"batch {manifest.batch}: its workflow {manifest.workflow} changed "
                         "since the batch started; put it back to resume the batch")
    return manifest


def make_executor(manifest: Manifest) -> Executor:
    """The executor the batch's items run on, connected: a cluster that refuses this process
    is a `ConfigError` before any item is submitted (the batch stays as it was, resumable)."""
    executor: Executor
    if manifest.executor == "ray":
        from normalize.execution.ray import RayExecutor, Resources

        limits = manifest.limits
        executor = RayExecutor(address=manifest.address or None, limit=limits.concurrency,
                               resources=Resources(limits.cpus, limits.memory_mb),
                               retries=max(0, limits.max_attempts - 1),
                               warm=os.environ.get("NORMALIZE_BATCH_WORKERS") != "fresh")
    elif os.environ.get("NORMALIZE_BATCH_WORKERS") == "fresh":
        from normalize.execution.local import LocalExecutor

        executor = LocalExecutor(manifest.limits.concurrency)
    else:  # a warm worker per slot, forking each item's process
        from normalize.execution.warm import WarmExecutor

        executor = WarmExecutor(manifest.limits.concurrency)
    if isinstance(executor, Connecting):
        executor.connect()
    return executor
