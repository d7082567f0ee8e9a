"""Finding workflows by name: the project's, the user's, then the built-ins."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from normalize.errors import UsageError
from normalize.store.paths import config_home


@dataclass(frozen=True)
class WorkflowEntry:
    """A workflow file found in one of the search places."""

    name: str
    path: Path
    origin: str  # "project", "user", "builtin"


def builtin_dir() -> Path:
    """The built-in workflows: packaged data, or the source tree's `workflows/`."""
    package = Path(__file__).parent.parent
    packaged = package / "_builtin_workflows"
    return packaged if packaged.is_dir() else package.parent / "workflows"


def search_dirs(workspace: Path) -> list[tuple[str, Path]]:
    return [
        ("project", workspace / ".normalize" / "workflows"),
        ("user", config_home() / "workflows"),
        ("builtin", builtin_dir()),
    ]


def list_workflows(workspace: Path) -> list[WorkflowEntry]:
    """Every workflow in the search places; earlier places shadow later ones."""
    seen: dict[str, WorkflowEntry] = {}
    for origin, directory in search_dirs(workspace):
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            seen.setdefault(path.stem, WorkflowEntry(path.stem, path, origin))
    return sorted(seen.values(), key=lambda e: e.name)


def find_workflow(ref: str, workspace: Path) -> Path:
    """A workflow file from a path or a name (`health`, `dwim.toml`)."""
    path = Path(ref)
    if path.is_file():
        return path
    looks_like_path = "/" in ref or ref.startswith(".")
    if not looks_like_path:
        name = ref.removesuffix(".toml")
        for _, directory in search_dirs(workspace):
            candidate = directory / f"{name}.toml"
            if candidate.is_file():
                return candidate
    names = ", ".join(e.name for e in list_workflows(workspace)) or "none"
    raise UsageError(f"{ref}: no such workflow file or name (known names: {names})")
