"""Finding workflows by name: the project's, the user's, then the built-ins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from normalize.errors import UsageError
from normalize.homes import config_home


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


def _always(path: Path) -> bool:
    del path
    return True


def find_workflow(ref: str, workspace: Path) -> Path:
    """A workflow file from a path or a name (`health`, `dwim.toml`)."""
    return locate_workflow(ref, workspace, _always).path


@dataclass(frozen=True)
class Located:
    """Which file a workflow reference means, and whether the user vouches for it.

    `origin` is "path" (named by path: the user's choice), "builtin", "user"
    (the user's config dir), "trusted" (a workspace file whose exact content
    `normalize trust` recorded) or "workspace" (found by name under the
    workspace, untrusted: its permissions may only narrow). `shadowed` is an
    untrusted workspace file passed over for the built-in or user workflow of
    the same name.
    """

    path: Path
    origin: str
    shadowed: Path | None = None

    @property
    def trusted(self) -> bool:
        return self.origin != "workspace"


def names_a_path(ref: str) -> bool:
    """Whether `ref` is a path (has a `/`, starts with `.` or ends in `.toml`) and not a name.

    A bare name never means a file of that name in the current directory, so
    a planted `./dwim` cannot stand in for the agent's workflow.
    """
    return "/" in ref or ref.startswith(".") or ref.endswith(".toml")


def locate_workflow(ref: str, workspace: Path,
                    is_trusted: Callable[[Path], bool] | None = None) -> Located:
    """The file `ref` names and its origin; built-in and user names win over an untrusted
    workspace file of the same name (`is_trusted` says which workspace files are trusted)."""
    path = Path(ref)
    if names_a_path(ref) and path.is_file():
        return Located(path, "path")
    if "/" not in ref and not ref.startswith("."):
        name = ref.removesuffix(".toml")
        found = [(origin, directory / f"{name}.toml") for origin, directory in
                 search_dirs(workspace)]
        found = [(origin, candidate) for origin, candidate in found if candidate.is_file()]
        if found:
            origin, candidate = found[0]
            if origin != "project":
                return Located(candidate, origin)
            if is_trusted is not None and is_trusted(candidate):
                return Located(candidate, "trusted")
            if len(found) > 1:
                return Located(found[1][1], found[1][0], shadowed=candidate)
            return Located(candidate, "workspace")
    names = ", ".join(e.name for e in list_workflows(workspace)) or "none"
    raise UsageError(f"{ref}: no such workflow file or name (known names: {names})")
