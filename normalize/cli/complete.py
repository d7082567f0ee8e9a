"""Shell completion: the values typer asks for, and keeping a completion request fast.

A completion request is a fresh `normalize` process per TAB
(`_NORMALIZE_COMPLETE=complete_bash COMP_WORDS=... COMP_CWORD=...`), so it
imports as little as it can: file names are listed, no task or workflow is
parsed, and neither the task store, anthropic, httpx, pydantic nor
prompt-toolkit is imported.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from normalize.contract.builtin import BUILTIN_DRIVERS
from normalize.homes import data_home
from normalize.workflow.catalog import search_dirs

COMPLETE_VAR = "_NORMALIZE_COMPLETE"


def task_ids(incomplete: str) -> list[str]:
    """`last` and the ids of the stored tasks that start with `incomplete`."""
    try:
        names = sorted(entry.name[:-5] for entry in os.scandir(data_home() / "tasks")
                       if entry.name.endswith(".json") and entry.name.startswith(incomplete))
    except OSError:
        names = []
    return ["last", *names] if "last".startswith(incomplete) else names


_DONE = re.compile(rb'"status"\s*:\s*"done"')


def _is_done(path: Path) -> bool:
    """Whether a task file says `done` near its top (its status comes before its history)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(2048)
    except OSError:
        return False
    return _DONE.search(head) is not None


def resumable_task_ids(incomplete: str) -> list[str]:
    """`task_ids` without the tasks that are done (nothing to resume there)."""
    tasks = data_home() / "tasks"
    return [t for t in task_ids(incomplete) if t == "last" or not _is_done(tasks / f"{t}.json")]


def drivers(incomplete: str) -> list[str]:
    """The built-in drivers' names (plugins' drivers are listed by `normalize plugins`)."""
    return [name for name in BUILTIN_DRIVERS if name.startswith(incomplete)]


def workflows(incomplete: str, cwd: Path | None = None) -> list[str]:
    """Workflow names (project, user, built-in), then `.toml` files matching the prefix.

    When nothing matches, the shell falls back to its own file completion.
    """
    here = cwd or Path.cwd()
    found: set[str] = set()
    for _, directory in search_dirs(here):
        try:
            found.update(entry.name[:-5] for entry in os.scandir(directory)
                         if entry.name.endswith(".toml"))
        except OSError:
            continue
    names = sorted(n for n in found if n.startswith(incomplete))
    head, _, tail = incomplete.rpartition("/")
    base = here / head if head else here
    prefix = f"{head}/" if head else ""
    try:
        files = sorted(prefix + entry.name for entry in os.scandir(base)
                       if entry.name.endswith(".toml") and entry.name.startswith(tail)
                       and entry.is_file() and _a_workflow(entry.path))
    except OSError:
        files = []
    return names + [f for f in files if f not in names]


WORKFLOW_TABLE = re.compile(rb"^[ \t]*\[\[?[ \t]*(?:workflow|steps|states)\b", re.M)


def _a_workflow(path: str) -> bool:
    """Whether a `.toml` file declares a workflow (`[workflow]`, `[[steps]]`, `[[states]]`),
    so `pyproject.toml`, `ruff.toml` or `Cargo.toml` are not offered to `run`."""
    try:
        with open(path, "rb") as handle:
            return WORKFLOW_TABLE.search(handle.read(65536)) is not None
    except OSError:
        return False


def lighten_typer() -> None:
    """Keep typer from importing pydantic and rich where it has nothing to convert or style.

    typer (0.29) converts every parameter value through a pydantic TypeAdapter
    that it builds on first use, importing pydantic (~20 ms, a third of typer's
    own import) even for an absent value, which it then returns unchanged,
    and for a string given to a `str` parameter, which it returns as is:
    `--help`, `tasks`, `resume ID` and every completion request paid for it.
    Here those two cases skip the step, with the same result (an absent
    repeatable option without a default is None, as typer makes it); other values
    are converted by typer. While completing (Click parses resiliently)
    values are left as parsed: only the cursor's place matters. zsh and fish completion
    strip rich markup from help texts by importing rich; ours have none
    (`rich_markup_mode=None`). With another typer, nothing is changed.
    """
    try:
        from typer._click.exceptions import MissingParameter
        from typer.core import _TyperParameter
    except ImportError:
        return
    original = getattr(_TyperParameter, "process_value", None)
    if original is None or getattr(original, "_normalize_light", False) or \
            not hasattr(_TyperParameter, "get_runtime_param"):
        return

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        if getattr(ctx, "resilient_parsing", False):
            return value
        if (self.multiple or self.nargs == -1) and value in (None, ()) and \
                self.default is None and not self.required:
            value = None  # an absent repeatable option (`--network`) with no default
        elif self.multiple or self.nargs == -1 or not (
                value is None or (isinstance(value, str) and _plain_str(self))):
            return original(self, ctx, value)
        if value is None and self.required:
            raise MissingParameter(ctx=ctx, param=self)
        return value if self.callback is None else self.callback(ctx, self, value)

    process_value._normalize_light = True  # type: ignore[attr-defined]
    _TyperParameter.process_value = process_value  # type: ignore[method-assign]
    try:
        import typer._completion_classes as classes

        if hasattr(classes, "_sanitize_help_text"):
            classes._sanitize_help_text = _plain
    except ImportError:
        pass


def _plain(text: str) -> str:
    return text


def _plain_str(param: Any) -> bool:
    """Whether a typer parameter is annotated `str` or `str | None` (nothing to convert)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is str or annotation == (str | None)
