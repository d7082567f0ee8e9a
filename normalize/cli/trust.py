"""`normalize trust FILE`: let a workspace workflow's permissions count (its exact content)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.console import Environment, fail
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.task import Task


def trust(env: Environment, files: list[Path], *, remove: bool, show: bool) -> int:
    """Trust, untrust or list; returns the exit status."""
    from normalize.permissions import config_path, trust_file, trusted_files, untrust_file

    try:
        if show or not files:
            if files:
                raise UsageError("--list takes no FILE")
            table = trusted_files()
            for path, digest in sorted(table.items()):
                state = _state(Path(path), digest)
                env.stdout.write(f"{digest[:12]}  {state:<9} {path}\n")
            if not table:
                env.stdout.write(f"no trusted files (in {config_path()})\n")
            return 0
        for file in files:
            if remove:
                if not untrust_file(file):
                    raise UsageError(f"{file}: not trusted")
                env.stdout.write(f"untrusted {file}\n")
            else:
                key, digest = trust_file(file)
                env.stdout.write(f"trusted {key} (sha256 {digest[:12]}); a change to it "
                                 f"untrusts it\n")
        return 0
    except NormalizeError as exc:
        return fail(env, exc)


def _state(path: Path, digest: str) -> str:
    from normalize.permissions import file_digest

    try:
        return "ok" if file_digest(path) == digest else "changed"
    except OSError:
        return "missing"


def report_ignored(env: Environment, task: Task) -> None:
    """One stderr line per permission a workspace file asked for and did not get (for `--json`
    and `--quiet`, whose views do not show the run's notices)."""
    for note in task.config.permission_notes:
        env.stderr.write(f"normalize: {note}\n")
    env.stderr.flush()
