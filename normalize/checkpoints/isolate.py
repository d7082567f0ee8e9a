"""Isolated copies of a workspace for sub-tasks, made from the shadow store; their diffs back.

A copy is the tree of the parent's current checkpoint, written out with git
plumbing in normalize's own store (`read-tree` into a private index, then
`checkout-index`): the person's `.git` is never opened, no branch or worktree
entry is made anywhere. What a build needs (a project's `.venv`,
`node_modules`) is linked, not copied: a symlink to the parent's, so the
child's programs can run the project's tests with it (its programs may read
it; the sandbox keeps them from writing it, as it is outside their
workspace). The links never reach the diff. A workspace that does not ignore
them has them in its checkpoints too: their entries stay in the copy's index,
marked skip-worktree, so they are neither written out under the link nor seen
as deleted (and the store's copy, which leaves out files over its size bound,
is never the one a build runs).

The child's changes are the difference between the base tree and the copy as
the child left it (`add -A` into the copy's private index, `write-tree`,
`diff-tree`). Applying them is one `git apply` in the parent's workspace,
which applies every hunk or none; a refusal names the file and the hunk. git
itself refuses to write through a symbolic link in the workspace.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from normalize.checkpoints.record import read_steps
from normalize.checkpoints.shadow import PRIVATE, CheckpointError, ShadowRepo
from normalize.programs import git_flags

LINKED = (".venv", "venv", "node_modules")
"""What a build needs that the store leaves out: linked from the parent's workspace."""

_FAILED = re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>\d+)$", re.MULTILINE)
_OTHER = re.compile(r"^error: (?P<path>[^:\n]+): (?P<why>.+)$", re.MULTILINE)
_HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)


@dataclass(frozen=True)
class Changes:
    """What a child changed in its copy: a binary-safe patch and its stat."""

    patch: bytes
    stat: str
    tree: str

    @property
    def empty(self) -> bool:
        return not self.patch.strip()


def _git(repo: ShadowRepo, *args: str, tree: Path, index: Path, input: bytes | None = None,
         check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """git in normalize's store, with `tree` as the work tree and a private `index`."""
    env = repo.env(index=str(index))
    env.update(GIT_WORK_TREE=str(tree), GIT_CEILING_DIRECTORIES=str(tree.parent))
    argv = [repo.git, *git_flags(), "-c", f"core.excludesFile={index.parent / 'exclude'}",
            *args]
    proc = subprocess.run(argv, input=input, cwd=tree, env=env, capture_output=True,
                          check=False, umask=PRIVATE)
    if check and proc.returncode != 0:
        raise CheckpointError(f"git {args[0]} failed: "
                              f"{proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc


def current_tree(repo: ShadowRepo, task_id: str) -> str:
    """The tree of the task's last workspace checkpoint (the workspace now, without one)."""
    steps = read_steps(repo, task_id)
    return steps[-1].tree if steps else repo.snapshot().tree


def make_copy(repo: ShadowRepo, tree: str, dest: Path) -> list[str]:
    """Write `tree` out into the new directory `dest`; link what a build needs; the links made.

    `dest`'s parent holds the copy's private index and excludes (owner-only).
    """
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest.mkdir(mode=0o700)
    index = dest.parent / "index"
    linked = [name for name in LINKED if (repo.workspace / name).is_dir()]
    (dest.parent / "exclude").write_text("".join(f"/{name}\n" for name in LINKED) + ".git\n")
    _git(repo, "read-tree", tree, tree=dest, index=index)
    if linked:  # stored too where the workspace does not ignore them: the link wins
        stored = _git(repo, "ls-files", "-z", "--", *linked, tree=dest, index=index).stdout
        if stored:
            _git(repo, "update-index", "-z", "--skip-worktree", "--stdin", tree=dest,
                 index=index, input=stored)
    _git(repo, "checkout-index", "-a", "-f", "-u", tree=dest, index=index)  # -u: stat data kept
    for name in linked:
        os.symlink(repo.workspace / name, dest / name, target_is_directory=True)
    return linked


def changes(repo: ShadowRepo, base: str, copy: Path) -> Changes:
    """What was changed in `copy` since `base` (made by `make_copy`)."""
    index = copy.parent / "index"
    _git(repo, "add", "-A", "--", ".", tree=copy, index=index)
    tree = _git(repo, "write-tree", tree=copy, index=index).stdout.decode().strip()
    patch = _git(repo, "diff-tree", "-p", "--binary", "--full-index", "--no-renames", base,
                 tree, tree=copy, index=index).stdout
    stat = _git(repo, "diff-tree", "--stat=100", "--no-renames", base, tree, tree=copy,
                index=index).stdout.decode(errors="replace").rstrip()
    return Changes(patch, stat, tree)


def apply(repo: ShadowRepo, patch: bytes, scratch: Path) -> list[str]:
    """Apply `patch` to the workspace, all of it or nothing; the refusals (file and hunk).

    A patch that is in the workspace already counts as applied.
    """
    workspace = repo.workspace
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    (scratch / "exclude").write_text(".git\n")
    proc = _git(repo, "apply", "--whitespace=nowarn", "-", tree=workspace,
                index=scratch / "apply-index", input=patch, check=False)
    if proc.returncode == 0:
        return []
    again = _git(repo, "apply", "--reverse", "--check", "-", tree=workspace,
                 index=scratch / "apply-index", input=patch, check=False)
    if again.returncode == 0:
        return []  # already there: this diff was applied before (its action ran again)
    return refusals(proc.stderr.decode(errors="replace"), patch.decode(errors="replace"))


def refusals(stderr: str, patch: str) -> list[str]:
    """`git apply`'s complaints as `FILE: hunk @@ … @@` lines (or `FILE: why`)."""
    out: list[str] = []
    for found in _FAILED.finditer(stderr):
        path, line = found["path"], found["line"]
        out.append(f"{path}: hunk {_hunk(patch, path, int(line)) or f'at line {line}'}")
    failed = {f["path"] for f in _FAILED.finditer(stderr)}
    for found in _OTHER.finditer(stderr):
        if found["path"] not in failed and not found["path"].startswith("patch failed"):
            out.append(f"{found['path']}: {found['why']}")
    return out or [stderr.strip()[:300] or "git apply refused the changes"]


def _hunk(patch: str, path: str, line: int) -> str | None:
    """The header of `path`'s hunk that starts at old line `line`, in `patch`."""
    at = patch.find(f"diff --git a/{path} b/{path}\n")
    if at < 0:
        return None
    end = patch.find("\ndiff --git ", at + 1)
    section = patch[at:] if end < 0 else patch[at:end]
    for found in _HUNK.finditer(section):
        if int(found["start"]) == line:
            return section[found.start():section.index("@@", found.start() + 2) + 2]
    return None


def remove_copy(copy: Path) -> None:
    """Remove a copy and its private index (the links, never what they point to)."""
    shutil.rmtree(copy.parent, ignore_errors=True)
