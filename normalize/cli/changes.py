"""`normalize diff`, `undo` and `report`: what a task changed, taking it back, a report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.console import Environment, fail
from normalize.cli.describe import plural
from normalize.errors import ExitStatus, NormalizeError

if TYPE_CHECKING:
    from normalize.redact import Redactor
    from normalize.store import TaskStore
    from normalize.task import Task


def _open(ref: str, verb: str) -> tuple[TaskStore, Task]:
    """The store and the task `ref` names; a batch's parent is refused, pointing at its items."""
    from normalize.errors import UsageError
    from normalize.homes import is_batch
    from normalize.store import TaskStore

    store = TaskStore()
    task = store.load(store.resolve(ref))
    if is_batch(store.home, task.id):
        raise UsageError(f"{task.id} is a batch: each of its items changed its own files; "
                         f"`normalize {verb} {task.id}/N` for item N (`normalize batch status "
                         f"{task.id}` lists them), `normalize batch collect {task.id} -o DIR` "
                         f"for every item's diff")
    return store, task


def show_diff(env: Environment, ref: str, step: int | None, *, stat: bool,
              json_output: bool) -> int:
    """The task's changes (or one step's) as a unified diff, `--stat` or JSON."""
    from normalize.checkpoints.changes import TaskChanges, readable_patch
    from normalize.redact import Redactor, inert

    try:
        store, task = _open(ref, "diff")
        changes = TaskChanges.open(store, task)
        patch = changes.patch(step)
        counts = changes.numstat(step)
    except NormalizeError as exc:
        return fail(env, exc)
    redactor = Redactor.for_workspace(task.workspace)  # shown as `tasks show` shows it
    if json_output:
        _write_diff_json(env, redactor, task.id, step, patch, counts)
        return 0
    patch = inert(redactor.redact(readable_patch(patch)))
    if stat:
        _write_diff_stat(env, redactor, patch, counts)
        return 0
    if not patch:
        env.stderr.write(f"task {task.id}: no changes\n")
        return 0
    if env.plain:
        env.stdout.write(patch)
        return 0
    _print_coloured_patch(env, patch)
    return 0


def _write_diff_json(env: Environment, redactor: Redactor, task_id: str, step: int | None,
                     patch: str, counts: dict[str, tuple[int, int]]) -> None:
    """`diff --json`: the patch as files and hunks, with git's line counts, redacted."""
    from normalize.checkpoints.changes import parse_patch, readable_patch
    from normalize.redact import inert_obj

    files = parse_patch(readable_patch(patch))
    for entry in files:
        added, removed = counts.get(entry["path"], (entry["added"], entry["removed"]))
        entry["added"], entry["removed"] = added, removed
        for hunk in entry["hunks"]:  # a key block spans lines: redacted as one text
            hunk["lines"] = redactor.redact("\n".join(hunk["lines"])).split("\n")
    data = inert_obj(redactor.redact_obj({"task": task_id, "step": step, "files": files}))
    env.stdout.write(json.dumps(data) + "\n")


def _write_diff_stat(env: Environment, redactor: Redactor, patch: str,
                     counts: dict[str, tuple[int, int]]) -> None:
    """`diff --stat`: a line per file with its counts (or what changed), then the totals."""
    from normalize.checkpoints.changes import parse_patch, readable_patch
    from normalize.redact import inert

    kinds = {entry["path"]: entry["status"] for entry in parse_patch(readable_patch(patch))}
    for path, (added, removed) in counts.items():
        shown = "binary" if added < 0 else f"+{added} -{removed}"
        if added == removed == 0:  # no lines either way: say what did change
            shown = EMPTY_CHANGE.get(kinds.get(path, ""), "mode changed")
        env.stdout.write(f" {inert(redactor.redact(path))}  {shown}\n")
    total_a = sum(max(a, 0) for a, _ in counts.values())
    total_r = sum(max(r, 0) for _, r in counts.values())
    env.stdout.write(f" {plural(len(counts), 'file')} changed, +{total_a} -{total_r}\n")


def _print_coloured_patch(env: Environment, patch: str) -> None:
    """The patch on a terminal: file headers bold, additions green, removals red, hunks cyan."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=env.stdout, highlight=False)
    for line in patch.splitlines():
        style = ("bold" if line.startswith(("diff --git", "+++", "---")) else
                 "green" if line.startswith("+") else "red" if line.startswith("-") else
                 "cyan" if line.startswith("@@") else "")
        console.print(Text(line, style=style), soft_wrap=True)


EMPTY_CHANGE = {"added": "added, empty", "deleted": "deleted, was empty"}
"""`diff --stat`'s words for a file that changed without a line added or removed."""


def undo_changes(env: Environment, ref: str, to_step: int | None, *, force: bool) -> int:
    """Put the files the task changed back; name each file refused."""
    from normalize.checkpoints.changes import undo
    from normalize.redact import Redactor, inert

    try:
        store, task = _open(ref, "undo")
        result = undo(store, task, to_step, force=force)
    except NormalizeError as exc:
        return fail(env, exc)
    redactor = Redactor.for_workspace(task.workspace)

    def shown(path: str) -> str:  # a file name is shown as every screen shows it
        return inert(redactor.redact(path))

    where = "before the task" if to_step is None else f"as after step {to_step}"
    if result.resumed:
        env.stderr.write(f"normalize: completing the undo of task {task.id} that was "
                         "interrupted\n")
    for path in result.restored:
        env.stdout.write(f"{'removed' if path in result.removed else 'restored'} "
                         f"{shown(path)}\n")
    for path in result.refused:
        env.stderr.write(f"normalize: refused {shown(path)}: changed since task {task.id} last "
                         "touched it (--force to restore it anyway)\n")
    for path, why in result.blocked.items():
        env.stderr.write(f"normalize: refused {shown(path)}: {inert(why)}\n")
    if not (result.restored or result.refused or result.blocked):
        env.stdout.write(f"task {task.id}: nothing to undo, the files are {where} already\n")
    elif result.restored:
        again = f"; undo this with `normalize undo {task.id} --to {result.step - 1}`" \
            if result.step else ""
        env.stdout.write(f"task {task.id}: {plural(len(result.restored), 'file')} put back {where}"
                         f"{again}\n")
    return int(ExitStatus.FAILED) if result.refused or result.blocked else 0


def _child_reports(store: TaskStore, task: Task, where: Path) -> list[Path]:
    """Each sub-task's report beside its parent's (the parent's report links them); the
    files written."""
    from normalize.checkpoints.report import render_report
    from normalize.checkpoints.reportfile import save_report

    written = []
    for child_id in task.children:
        try:
            child = store.load(child_id)
        except NormalizeError:
            continue  # the parent's report says it is unreadable
        written.append(save_report(render_report(store, child), child.id, store.home,
                                   where / f"report-{child.id}.html"))
        written += _child_reports(store, child, where)
    return written


def write_report(env: Environment, ref: str, output: Path | None,
                 home: Path | None = None, published: str = "") -> int:
    """The task's self-contained HTML report, to `-o PATH` or under the data home (`home`
    when the task is read from elsewhere: a batch's store pulled to a scratch copy, with the
    change it `published`)."""
    from normalize.checkpoints.report import render_report
    from normalize.checkpoints.reportfile import save_report
    from normalize.cli.commands import load_or_salvage
    from normalize.store import TaskStore

    try:
        store = TaskStore()
        task = load_or_salvage(env, store, store.resolve(ref))
        text = render_report(store, task, published)
        if output is not None and str(output) == "-":
            env.stdout.write(text)
            return 0
        path = save_report(text, task.id, home or store.home, output)
        beside = _child_reports(store, task, path.parent)
    except NormalizeError as exc:
        return fail(env, exc)
    except OSError as exc:
        env.stderr.write(f"normalize: error: {output}: {exc.strerror or exc}\n")
        return int(ExitStatus.USAGE)
    env.stdout.write(f"wrote {path}\n")
    if beside:  # the parent's report links them: said, never written quietly
        env.stdout.write(f"  and beside it, linked from it, the reports of "
                         f"{plural(len(beside), 'sub-task')}: "
                         f"{', '.join(p.name for p in beside)}\n")
    return 0
