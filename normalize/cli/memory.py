"""`normalize memory list|show|inbox|accept|reject|edit|forget`: review what the agent learnt.

Entries belong to the project of the workspace (`-w DIR`, else the current
directory: its repository, shared by its worktrees) or to the user (`accept
--user`). Only accepted entries reach a model; the inbox shows where each
candidate came from before it is accepted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cli.console import Environment, fail
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.memory import MemoryStore
    from normalize.memory.entries import MemoryEntry

STATE_MARKS = {"inbox": "?", "accepted": "✓", "rejected": "✗"}


def _open(workspace: Path | None) -> tuple[MemoryStore, Path]:
    from normalize.homes import data_home
    from normalize.memory import open_memory
    from normalize.memory.settings import DEFAULT_STORE, user_settings
    from normalize.permissions import config_path, load_user_memory

    root = (workspace or Path.cwd()).resolve()
    if not root.is_dir():
        raise UsageError(f"--workspace {workspace}: not a directory")
    store = user_settings(load_user_memory(), str(config_path())).store or DEFAULT_STORE
    return open_memory(data_home(), root, store), root


def _ids(refs: list[str]) -> list[int]:
    out = []
    for ref in refs:
        try:
            out.append(int(ref.lstrip("#")))
        except ValueError:
            raise UsageError(f"{ref!r} is not a memory entry id (a number: normalize memory "
                             "list --all shows them)") from None
    return out


def _entry(store: MemoryStore, entry_id: int) -> MemoryEntry:
    entry = store.get(entry_id)
    if entry is None:
        raise UsageError(f"no memory entry #{entry_id} in this project or yours "
                         "(normalize memory list --all shows them)")
    return entry


def _dump(entry: MemoryEntry) -> dict[str, Any]:
    return entry.to_dict()


def _line(entry: MemoryEntry, *, why: bool = False) -> str:
    stale = "  (possibly stale: a file it names changed)" if entry.stale else ""
    scope = " [user]" if entry.scope == "user" else ""
    line = f"{STATE_MARKS.get(entry.state, ' ')} #{entry.id}{scope}  {entry.text}{stale}\n"
    if why:
        task = f", task {entry.task}" if entry.task else ""
        line += f"      from: {entry.source}{task}: {entry.why}\n"
    return line


def _listing(env: Environment, entries: list[MemoryEntry], json_output: bool, empty: str,
             why: bool = False) -> None:
    if json_output:
        env.stdout.write(json.dumps([_dump(e) for e in entries]) + "\n")
        return
    for entry in entries:
        env.stdout.write(_line(entry, why=why))
    if not entries:
        env.stdout.write(empty + "\n")


def memory_list(env: Environment, *, workspace: Path | None, every: bool,
                json_output: bool) -> int:
    """Accepted entries (every state with `every`), each stale one marked."""
    from normalize.memory.entries import is_stale

    try:
        store, root = _open(workspace)
        entries = store.entries() if every else store.entries("accepted")
        for entry in entries:
            entry.stale = is_stale(entry, root)
        _listing(env, entries, json_output, "no memory entries" if every else
                 "no accepted memory entries (normalize memory inbox shows the proposed ones)")
        store.close()
        return 0
    except NormalizeError as exc:
        return fail(env, exc)


def memory_inbox(env: Environment, *, workspace: Path | None, json_output: bool) -> int:
    """The proposed entries, each with where it came from."""
    try:
        store, _ = _open(workspace)
        _listing(env, store.entries("inbox"), json_output, "the memory inbox is empty",
                 why=True)
        if not json_output and store.entries("inbox"):
            env.stdout.write("accept with: normalize memory accept ID…  "
                             "(or reject, edit ID TEXT)\n")
        store.close()
        return 0
    except NormalizeError as exc:
        return fail(env, exc)


def memory_show(env: Environment, ref: str, *, workspace: Path | None,
                json_output: bool) -> int:
    from normalize.memory.entries import file_hash, is_stale

    try:
        store, root = _open(workspace)
        entry = _entry(store, _ids([ref])[0])
        entry.stale = is_stale(entry, root)
        store.close()
    except NormalizeError as exc:
        return fail(env, exc)
    if json_output:
        env.stdout.write(json.dumps(_dump(entry)) + "\n")
        return 0
    out = env.stdout
    out.write(f"#{entry.id}  {entry.state}  ({entry.scope})\n  {entry.text}\n")
    out.write(f"  from:    {entry.source}: {entry.why}\n")
    if entry.task:
        out.write(f"  task:    {entry.task} (turn {entry.step})\n")
    out.write(f"  written: {time.strftime('%Y-%m-%d %H:%M', time.localtime(entry.created))}\n")
    for rel, digest in entry.files.items():
        now = file_hash(root / rel)
        state = "unchanged" if now == digest else "gone" if now is None else "changed since"
        out.write(f"  file:    {rel} ({state})\n")
    return 0


def memory_set_state(env: Environment, refs: list[str], state: str, *,
                     workspace: Path | None, user: bool = False, every: bool = False) -> int:
    """`accept` or `reject` entries (`every`: the whole inbox); `user`: into the user's scope."""
    try:
        store, _ = _open(workspace)
        if every == bool(refs):
            raise UsageError("name the entries (IDs) or --all, not both" if every else
                             "which entries? name their IDs (normalize memory inbox) or --all")
        entries = store.entries("inbox") if every else [_entry(store, i) for i in _ids(refs)]
        for entry in entries:
            entry.state = state
            if user:
                entry.scope = "user"
            store.update(entry)
            env.stdout.write(f"{state} #{entry.id}: {entry.text}\n")
        if not entries:
            env.stdout.write("the memory inbox is empty\n")
        store.close()
        return 0
    except NormalizeError as exc:
        return fail(env, exc)


def memory_edit(env: Environment, ref: str, text: str, *, workspace: Path | None) -> int:
    """New text for an entry (redacted; the files it names hashed again)."""
    from normalize.memory.entries import clip, mentioned_files
    from normalize.redact import Redactor

    try:
        store, root = _open(workspace)
        entry = _entry(store, _ids([ref])[0])
        if not text.strip():
            raise UsageError("the new text is empty (normalize memory forget ID removes one)")
        entry.text = Redactor.for_workspace(root).redact(clip(text))
        entry.files = mentioned_files(entry.text, root)
        store.update(entry)
        store.close()
        env.stdout.write(f"edited #{entry.id} ({entry.state}): {entry.text}\n")
        return 0
    except NormalizeError as exc:
        return fail(env, exc)


def memory_forget(env: Environment, refs: list[str], *, workspace: Path | None) -> int:
    try:
        store, _ = _open(workspace)
        entries = [_entry(store, i) for i in _ids(refs)]
        if not entries:
            raise UsageError("which entries? name their IDs (normalize memory list --all)")
        for entry in entries:
            store.delete(entry.id)
            env.stdout.write(f"forgot #{entry.id}: {entry.text}\n")
        store.close()
        return 0
    except NormalizeError as exc:
        return fail(env, exc)
