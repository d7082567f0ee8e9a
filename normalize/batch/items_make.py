"""Making a batch item's task: its workflow with `{item.NAME}`, its own workspace, its limits.

The task's id comes from the batch and the item's position (`manifest.item_id`),
so a batch that resumes finds the task it made before. Its workspace is the
manifest's template with the item's fields: `dir:PATH` (a directory there
already, relative to where the batch started), `clone:REPO` (a fresh clone,
under `copies/ITEM/` in the data home) or `copy` (an isolated copy of the
batch's workspace at its start, made from the shadow store, as an isolated
sub-task's is).

A clone starts through normalize's door for programs (`normalize.programs`):
git found by the trusted rule (never a `git` the workspace holds), hardened
as for checkpoints, with only the transports of `CLONE_PROTOCOLS` (never
`ext::` or `fd::`), under a time limit (`NORMALIZE_CLONE_TIMEOUT`, default
600 s). `start_clone` only starts it: the batch's parent polls it, so a clone
that stalls holds its own item, never the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from normalize.batch.manifest import Manifest
from normalize.errors import NormalizeError, UsageError
from normalize.programs import CLONE_PROTOCOLS, Program, git_flags, start, time_limit
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


def _where(manifest: Manifest, item: dict[str, Any]) -> tuple[str, str]:
    """The item's workspace template filled in: (kind, the rest)."""
    template = manifest.workspace or "copy"
    try:
        where = interpolate(template, {**manifest.variables, "item": item})
    except (KeyError, IndexError, TypeError) as exc:
        raise UsageError(f"workspace {template!r}: this item has no field {exc}") from None
    kind, _, rest = where.partition(":")
    return kind, rest


def workspace_for(manifest: Manifest, item: dict[str, Any], item_id: str,
                  store: TaskStore) -> Path:
    """The item's workspace, made when it is a clone or a copy; UsageError naming the item."""
    kind, rest = _where(manifest, item)
    if kind == "dir":
        path = (Path(manifest.origin) / rest).resolve()
        if not path.is_dir():
            raise UsageError(f"workspace {path}: not a directory")
        return path
    place = store.home / "copies" / item_id
    if kind == "clone":
        return Cloning.begin(rest, place, manifest.origin, store.home).wait()
    return _copy(manifest, place)


def start_clone(manifest: Manifest, item: dict[str, Any], item_id: str,
                store: TaskStore) -> Cloning | None:
    """The clone the item's workspace is, started; None when its workspace is no clone."""
    kind, rest = _where(manifest, item)
    if kind != "clone":
        return None
    return Cloning.begin(rest, store.home / "copies" / item_id, manifest.origin, store.home)


@dataclass
class Cloning:
    """A fresh clone of `repo` being made at `dest` (a clone made before is kept)."""

    repo: str
    dest: Path
    program: Program | None  # None: cloned by an earlier run of the batch

    @classmethod
    def begin(cls, repo: str, place: Path, origin: str, home: Path) -> Cloning:
        from normalize.checkpoints import isolate

        dest = place / (Path(repo.rstrip("/")).stem or "repo")
        if (dest / ".git").is_dir():
            return cls(repo, dest, None)  # before its task was made, by an earlier run
        isolate.remove_copy(dest)
        place.mkdir(mode=0o700, parents=True, exist_ok=True)
        source = _local(repo, origin)
        try:
            program = start(["git", *git_flags(transport=True), "clone", "--quiet", "--",
                             source, str(dest)],
                            timeout=time_limit("clone", CLONE_TIMEOUT), untrusted=(origin, home),
                            env={"GIT_ALLOW_PROTOCOL": CLONE_PROTOCOLS,
                                 "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
        except NormalizeError as exc:
            raise UsageError(f"clone {repo}: {exc}") from None
        return cls(repo, dest, program)

    def poll(self) -> Path | None:
        """The clone once made, None while git runs; UsageError when it failed or timed out."""
        if self.program is None:
            return self.dest
        ended = self.program.poll()
        return None if ended is None else self._made(ended.ok, ended.why())

    def wait(self) -> Path:
        if self.program is None:
            return self.dest
        ended = self.program.wait()
        return self._made(ended.ok, ended.why())

    def stop(self) -> None:
        """Stop the clone (the batch was cancelled); what it made so far is removed."""
        if self.program is not None:
            self.program.stop()
            self._made(False, "stopped")

    def _made(self, ok: bool, why: str) -> Path:
        from normalize.checkpoints import isolate

        if not ok:
            isolate.remove_copy(self.dest)
            raise UsageError(f"clone {self.repo}: {why}")
        return self.dest


def _local(repo: str, origin: str) -> str:
    """A relative path means one beside the batch's start (git runs in an empty directory);
    a URL (`scheme://`, `host:path`, `transport::address`) is left as it is."""
    first = repo.split("/", 1)[0]
    if ":" in first or os.path.isabs(repo):
        return repo
    return str(Path(origin) / repo)


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
              store: TaskStore, budget: float | None, workspace: Path | None = None) -> Task:
    """Create the item's task in the store (its workspace made first, unless given)."""
    item = manifest.items[position]
    spec = item_spec(manifest, item)
    if workspace is None:
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
