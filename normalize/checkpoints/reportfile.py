"""Where a task's report is written: where the person said, never through a symlink.

`-o PATH` is walked component by component beneath a directory descriptor
without following a link (a relative path from the working directory, an
absolute one from `/`), so a link planted anywhere on the way is refused by
name rather than written through. Without `-o`, the report goes under the
data home's `reports/` (owner-only, where no program normalize runs can
write), never into the project, where it would show up in `git status`.
"""

from __future__ import annotations

import os
from pathlib import Path

from normalize import artefacts, fsopen
from normalize.errors import UsageError

__all__ = ["default_report_path", "save_report"]


def default_report_path(home: Path, task_id: str) -> Path:
    """Where `normalize report ID` writes without `-o`."""
    return home / "reports" / f"report-{task_id}.html"


def _anchor(output: Path) -> tuple[Path, Path]:
    """The directory the walk starts from, and the path beneath it."""
    if not output.is_absolute() and ".." not in output.parts:
        return Path("."), output
    absolute = Path(os.path.abspath(output))  # lexical: nothing is resolved, nothing followed
    return Path(absolute.anchor), absolute.relative_to(absolute.anchor)


def save_report(text: str, task_id: str, home: Path, output: Path | None = None) -> Path:
    """Write the report (owner-only) and return its absolute path.

    A report is shared (a CI artifact, an attachment): its text passes the
    artefact door (`normalize.artefacts`) on the way, though it was made from
    redacted data already."""
    if output is None:
        target = default_report_path(home, task_id)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(target.parent, 0o700)
        root, rel = target.parent, Path(target.name)
    else:
        root, rel = _anchor(output)
    try:
        fsopen.place(root, rel, artefacts.shown_bytes("report.html", text.encode("utf-8")),
                     mode=0o600, replace_link=False)
    except fsopen.LinkRefusedError as exc:
        link = Path(os.path.abspath(root / str(exc.filename)))
        raise UsageError(f"{output or rel}: refusing to write the report through {link} "
                         "(a symlink, or not a directory)") from None
    except IsADirectoryError:
        raise UsageError(f"{output}: is a directory; name the report file") from None
    return Path(os.path.abspath(root / rel))
