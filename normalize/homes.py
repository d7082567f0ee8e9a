"""Where normalize keeps its data: `NORMALIZE_HOME`, else the platform's user data dir."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from normalize.errors import UsageError


def _absolute(value: str) -> Path:
    """`value` with `~` expanded, resolved against the current directory when relative."""
    return Path(os.path.abspath(os.path.expanduser(value)))


def data_home(env: dict[str, str] | None = None) -> Path:
    """The user's normalize data directory (not created), always an absolute path."""
    environ = os.environ if env is None else env
    override = environ.get("NORMALIZE_HOME")
    if override:
        return _absolute(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("normalize"))


def config_home(env: dict[str, str] | None = None) -> Path:
    """The user's normalize config directory (workflows live in `workflows/` under it)."""
    environ = os.environ if env is None else env
    override = environ.get("NORMALIZE_CONFIG")
    if override:
        return _absolute(override)
    if environ.get("NORMALIZE_HOME"):
        return _absolute(environ["NORMALIZE_HOME"]) / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir("normalize"))


def harness_root(home: Path) -> Path:
    """Where harness drivers keep every task's sessions: beside the data home, not in it
    (programs cannot see the data home; a harness must write its own session files).
    Each task's programs see none of it but, in a harness turn, that task's own home."""
    return home.parent / f"{home.name}-harness"


def _unusable(path: Path) -> str | None:
    """Why `path` can never be normalize's data directory (None when it can).

    An existing read-only directory is not refused: tasks can still be listed
    and shown from it, and a write says which directory to make writable.
    """
    if path.exists():
        return None if path.is_dir() else "is not a directory"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created ({parent} is not a directory)"
    return None if os.access(parent, os.W_OK | os.X_OK) else \
        f"cannot be created ({parent} is not writable)"


def settle_homes(environ: MutableMapping[str, str] | None = None) -> None:
    """Make `NORMALIZE_HOME` and `NORMALIZE_CONFIG` absolute, once, as a run starts.

    A relative value is resolved against the current directory here, so every
    later reader (the store, the workspace checkpoints, the programs started
    in the workspace) means the same directory. One that cannot hold normalize's
    data is refused with a `UsageError` naming the variable.
    """
    environ = os.environ if environ is None else environ
    for name in ("NORMALIZE_HOME", "NORMALIZE_CONFIG"):
        value = environ.get(name)
        if not value:
            continue
        path = _absolute(value)
        problem = _unusable(path)
        if problem is not None:
            raise UsageError(f"{name}={value}: {path} {problem}; point {name} at a "
                             f"directory you can write")
        environ[name] = str(path)


def batch_manifest(home: Path, batch: str) -> Path:
    """Where a batch's manifest lives under a data home (`batches/BATCH/manifest.json`)."""
    return home / "batches" / batch / "manifest.json"


def is_batch(home: Path, task_id: str) -> bool:
    """Whether `task_id` is a batch's parent (it has a manifest); light, for `resume`."""
    return batch_manifest(home, task_id).is_file()


def batch_item_id(batch: str, position: int) -> str:
    """A batch item's task id: the same for the same batch and position, on every run."""
    import hashlib  # (loaded by batches only)

    return hashlib.sha256(f"{batch}/item/{position}".encode()).hexdigest()[:8]
