"""The workspace guard: every path a tool touches stays inside the workspace.

A path is refused when it is absolute, starts with `~`, escapes with `..`, or
resolves (through symlinks) outside the workspace. Writes are also refused
into any `.git` (a directory or a worktree's `.git` file, at any depth: a
nested repository's `sub/.git/config` runs code through `core.fsmonitor`), into
the workspace's `.normalize/` (its workflows set permissions) and into
normalize's own data directory. Reading them is fine.

A symlink inside the workspace that points inside it is followed here, once;
the file tools then open the resolved path component by component without
following any link (`normalize.fsopen`), so a link swapped in after this
check makes the operation fail instead of escaping.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from normalize.errors import WorkspaceError


class WorkspaceGuard:
    """Resolves user-given paths against a workspace root and refuses escapes."""

    def __init__(self, root: Path | str, protected: Iterable[Path | str] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        self.protected = [Path(os.path.realpath(p)) for p in protected]

    def resolve(self, path: str | Path, *, write: bool = False) -> Path:
        """The real path of `path` inside the workspace, or `WorkspaceError`."""
        text = str(path)
        if not text or text == ".":
            return self.root
        if "\x00" in text:
            raise WorkspaceError(f"refused {text!r}: the path contains a NUL byte")
        if text.startswith("~"):
            raise WorkspaceError(f"refused {text!r}: `~` paths leave the workspace")
        if os.path.isabs(text):
            raise WorkspaceError(
                f"refused {text!r}: absolute paths are not allowed; use a path relative to "
                f"the workspace"
            )
        real = Path(os.path.realpath(self.root / text))
        if not self._inside(real, self.root):
            how = "a symlink points" if self._lexically_inside(text) else "`..` leads"
            raise WorkspaceError(f"refused {text!r}: {how} outside the workspace")
        if write:
            self.check_writable(real, text)
        return real

    def check_writable(self, real: Path, shown: str) -> None:
        """Refuse writes into any `.git`, the workspace's `.normalize/`, normalize's own data."""
        for parts in (real.relative_to(self.root).parts, Path(os.path.normpath(shown)).parts):
            folded = [part.casefold() for part in parts]  # `.GIT` is `.git` on macOS
            if ".git" in folded:
                raise WorkspaceError(f"refused {shown!r}: writes into .git are not allowed "
                                     f"(at any depth)")
            if folded[:1] == [".normalize"]:
                raise WorkspaceError(f"refused {shown!r}: writes into .normalize/ are not "
                                     f"allowed (its workflows set permissions)")
        for place in self.protected:
            if self._inside(real, place):
                raise WorkspaceError(f"refused {shown!r}: normalize's own data is protected")

    def relative(self, path: Path) -> str:
        """`path` relative to the workspace, with forward slashes ("." for the root)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return rel.as_posix() or "."

    def _lexically_inside(self, text: str) -> bool:
        return not os.path.normpath(text).startswith("..")

    @staticmethod
    def _inside(path: Path, root: Path) -> bool:
        return path == root or root in path.parents
