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
the child left it (what git lists as new or changed, into the copy's private
index, `write-tree`, `diff-tree`); a path git refuses as a `.git` (`.GIT`,
`.git.`, `git~1`: `shadow.dot_git`) is left out, as the checkpoints leave it
out. Applying them is planned by one `git apply --cached` into a private index
of the touched files as the workspace has them, which applies every hunk or
none (a refusal names the file and the hunk); the result is then landed whole
or not at all (`landing.py`: staged beside the targets, journaled, renamed),
never through a symbolic link.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from normalize.checkpoints import landing
from normalize.checkpoints.landing import Move
from normalize.checkpoints.record import read_steps
from normalize.checkpoints.shadow import PRIVATE, CheckpointError, ShadowRepo, dot_git
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
    others = _git(repo, "ls-files", "-z", "--others", "--exclude-standard", tree=copy,
                  index=index).stdout
    changed = _git(repo, "diff-files", "--name-only", "-z", "--no-renames",
                   "--ignore-submodules=all", tree=copy, index=index).stdout
    listed = [p for p in (others + changed).split(b"\0") if p]
    kept = [p for p in dict.fromkeys(listed) if not dot_git(os.fsdecode(p))]  # as checkpoints
    if kept:
        _git(repo, "update-index", "--add", "--remove", "-z", "--stdin", tree=copy,
             index=index, input=b"".join(p + b"\0" for p in kept))
    tree = _git(repo, "write-tree", tree=copy, index=index).stdout.decode().strip()
    patch = _git(repo, "diff-tree", "-p", "--binary", "--full-index", "--no-renames", base,
                 tree, tree=copy, index=index).stdout
    stat = _git(repo, "diff-tree", "--stat=100", "--no-renames", base, tree, tree=copy,
                index=index).stdout.decode(errors="replace").rstrip()
    return Changes(patch, stat, tree)


def apply(repo: ShadowRepo, patch: bytes, scratch: Path) -> list[str]:
    """Apply `patch` to the workspace, all of it or nothing; the refusals (file and hunk).

    A patch that is in the workspace already counts as applied; so does one a
    killed process staged whole (`landing.settle` completes it; one it staged
    in part is taken back first). A failure to write raises `MergeError`.
    """
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    (scratch / "exclude").write_text(".git\n")
    journal = scratch / "merge.json"
    if landing.settle(repo.workspace, journal):
        return []
    moves, refused = plan(repo, patch, scratch)
    if moves and not refused:
        landing.land(repo, moves, journal)
    return refused


def plan(repo: ShadowRepo, patch: bytes, scratch: Path) -> tuple[list[Move], list[str]]:
    """Each path `patch` touches as it will be, and the refusals (then nothing is planned).

    A patch that is in the workspace already plans nothing.
    """
    index = scratch / "merge-index"
    index.unlink(missing_ok=True)
    workspace = repo.workspace
    listed = _git(repo, "apply", "--numstat", "-z", "-", tree=workspace, index=index,
                    input=patch).stdout
    paths = [os.fsdecode(r.split(b"\t", 2)[2]) for r in listed.split(b"\0") if r.count(b"\t") >= 2]
    here = [p for p in paths if os.path.lexists(workspace / p)]
    if here:
        added = _git(repo, "update-index", "--add", "-z", "--stdin", tree=workspace,
                       index=index, input=b"".join(os.fsencode(p) + b"\0" for p in here),
                       check=False)
        if added.returncode != 0:
            return [], refusals(added.stderr.decode(errors="replace"), "")
    proc = _git(repo, "apply", "--cached", "--whitespace=nowarn", "-", tree=workspace,
                  index=index, input=patch, check=False)
    if proc.returncode != 0:
        again = _git(repo, "apply", "--cached", "--reverse", "--check", "-", tree=workspace,
                       index=index, input=patch, check=False)
        if again.returncode == 0:
            return [], []  # already there: this diff was applied before (its action ran again)
        return [], refusals(proc.stderr.decode(errors="replace"), patch.decode(errors="replace"))
    staged = _git(repo, "ls-files", "-s", "-z", tree=workspace, index=index).stdout
    entries: dict[str, tuple[str, str]] = {}
    for record in staged.split(b"\0"):
        if record:
            info, _, raw = record.partition(b"\t")
            mode, sha, _ = info.decode().split()
            entries[os.fsdecode(raw)] = (mode, sha)
    moves = [Move(p, *entries[p]) if p in entries else Move(p) for p in paths]
    return moves, []


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
