"""Putting files back for `undo` and `rewind`: race-free writes and a journal of intent.

Every write goes through `normalize.fsopen`: each directory of a path is
opened beneath its parent's descriptor without following a link, a file is
created `O_EXCL` under a temporary name in that directory and renamed over
the name there, and a removal is an `unlinkat` on the same descriptor. A
component that is a symlink (or no longer a directory) refuses that path, by
name; nothing is ever written through it.

Before the first file changes, an undo writes its intent (each path, the blob
it is put back to, and the content it had when planned) beside the shadow
store (`undo/TASKID.json`). A re-run of an undo that was killed half-way
finds the intent and completes it: a path already put back is counted done,
one still as planned is restored, one someone changed since is refused.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from normalize import fsopen
from normalize.checkpoints.shadow import CheckpointError, Entry, ShadowRepo, blob_id, read_current
from normalize.fsutil import atomic_write, json_bytes

__all__ = ["UndoIntent", "apply_restore", "drop_intent", "load_intent", "put_back",
           "resume_intent", "save_intent", "state_of"]

UNDO_TMP = ".{name}.normalize-undo.tmp"


@dataclass
class UndoIntent:
    """An undo's plan, written before it changes a file: `path -> "MODE SHA"` ("" removes it)."""

    task: str
    target: int
    paths: dict[str, str] = field(default_factory=dict)
    before: dict[str, str] = field(default_factory=dict)  # path -> "KIND SHA" when planned


def state_of(workspace: Path, rel: str) -> str:
    """A workspace file now as "KIND SHA" (KIND `file` or `link`); "" when absent."""
    current = read_current(workspace / rel)
    if current is None:
        return ""
    mode, data = current
    return f"{'link' if mode == '120000' else 'file'} {blob_id(data)}"


def entry_state(entry: Entry | None) -> str:
    """What `state_of` says of a file once it is as `entry` has it."""
    if entry is None:
        return ""
    return f"{'link' if entry.link else 'file'} {entry.sha}"


def encode(entry: Entry | None) -> str:
    return "" if entry is None else f"{entry.mode} {entry.sha}"


def decode(text: str) -> Entry | None:
    if not text:
        return None
    mode, sha = text.split(" ", 1)
    return Entry(mode, sha)


def intent_path(repo: ShadowRepo, task_id: str) -> Path:
    return repo.root / "undo" / f"{task_id}.json"


def save_intent(repo: ShadowRepo, intent: UndoIntent) -> None:
    """Write the intent durably, owner-only, before the first file changes."""
    folder = repo.root / "undo"
    folder.mkdir(mode=0o700, exist_ok=True)
    atomic_write(intent_path(repo, intent.task), json_bytes(asdict(intent)), mode=0o600)


def load_intent(repo: ShadowRepo, task_id: str) -> UndoIntent | None:
    """The intent an interrupted undo of the task left; None when there is none."""
    try:
        raw = json.loads(intent_path(repo, task_id).read_bytes())
        return UndoIntent(task=str(raw["task"]), target=int(raw["target"]),
                          paths={str(k): str(v) for k, v in raw["paths"].items()},
                          before={str(k): str(v) for k, v in raw["before"].items()})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{intent_path(repo, task_id)}: an unreadable undo journal "
                              f"({exc}); delete it to start over") from None


def drop_intent(repo: ShadowRepo, task_id: str) -> None:
    intent_path(repo, task_id).unlink(missing_ok=True)


def resume_intent(workspace: Path, intent: UndoIntent
                  ) -> tuple[dict[str, Entry | None], list[str], list[str]]:
    """What is left of an interrupted undo: (still to do, already done, changed since)."""
    todo: dict[str, Entry | None] = {}
    done: list[str] = []
    refused: list[str] = []
    for rel, text in intent.paths.items():
        entry = decode(text)
        now = state_of(workspace, rel)
        if now == entry_state(entry):
            done.append(rel)
        elif now == intent.before.get(rel):
            todo[rel] = entry
        else:
            refused.append(rel)
    return todo, done, refused


def apply_restore(repo: ShadowRepo, todo: dict[str, Entry | None]
                  ) -> tuple[list[str], dict[str, str]]:
    """Put each file back as the store has it: (restored, refused path -> why)."""
    blobs = repo.blobs(e.sha for e in todo.values() if e is not None)
    restored: list[str] = []
    refused: dict[str, str] = {}
    for rel, entry in todo.items():
        try:
            put_back(repo.workspace, rel, entry, blobs[entry.sha] if entry else None)
        except fsopen.LinkRefusedError as exc:
            refused[rel] = f"{exc.filename} is a symlink or no longer a directory; nothing " \
                           "was written through it"
        except IsADirectoryError:
            refused[rel] = f"{rel} is a directory now; restore it by hand"
        else:
            restored.append(rel)
    return restored, refused


def put_back(workspace: Path, rel: str, entry: Entry | None, data: bytes | None) -> None:
    """One file as `entry` has it, or removed (when `entry` is None), beneath the workspace."""
    parts = rel.split("/")
    if any(p in ("", ".", "..", ".git") for p in parts) or rel.startswith("/"):
        raise CheckpointError(f"refusing an unsafe path from the store: {rel!r}")
    if entry is None:
        fsopen.remove(workspace, rel)
        return
    assert data is not None
    mode = 0o755 if entry.mode == "100755" else 0o644
    fsopen.place(workspace, rel, data, mode=mode, link=entry.link,
                 tmp=UNDO_TMP.format(name=parts[-1][:200]), crash="undo_write")


def leftovers(workspace: Path, paths: list[str]) -> None:
    """Remove the temporary files an interrupted undo left beside `paths`."""
    for rel in paths:
        head, _, name = rel.rpartition("/")
        tmp = f"{head}/{UNDO_TMP.format(name=name[:200])}" if head else \
            UNDO_TMP.format(name=name[:200])
        try:
            fsopen.remove(workspace, tmp, prune=False)
        except (OSError, CheckpointError):
            continue

