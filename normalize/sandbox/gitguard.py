"""Every `.git` and `.normalize` stays the person's: a fingerprint before a program, a check after.

What git runs by itself lives in a repository's `config` (`core.fsmonitor`,
`core.pager`, filters, aliases), `hooks/` and, for a linked checkout, in what
a `.git` file or `commondir` points to. A program that could write one of
them would have the person's next `git status` run its code. The mount tier
makes the workspace's own `.git`s read-only, but not a `.git` a program
creates, nor repositories below dependency trees; the Landlock tier cannot
make any of them read-only. So around every side-effecting action the engine
takes a fingerprint and compares it after:

- what is watched: the existence and kind of every `.git` and `.normalize`
  at any depth of the workspace (`node_modules`, virtualenvs and submodules
  included); of each `.git` directory its `config`, `config.worktree`,
  `commondir`, `gitdir`, `hooks/` and `info/`, and the same of every git
  directory under its `modules/` and `worktrees/`; a `.git` file's or link's
  content; everything under a `.normalize`. Contents up to `KEEP_BYTES` are
  kept, so a change can be put back.
- what is undone: a changed, added or removed entry of an existing `.git` or
  `.normalize` is restored as it was; a new `.normalize`, a new `.git` file
  or link, and a new `.git` directory that is not inert are removed whole (the
  safest answer: the program made it this very action, so nothing of the
  person's is lost, and a repository's code paths are too many to clean one
  by one). A new `.git` directory is inert, and kept, when its config holds
  only the keys `git init` and `git clone` write (`SAFE_KEYS`) and its hooks
  are only `.sample` files: `git clone`, `cargo new` and `pip install -e
  git+…` keep working, while anything set later is undone as above. A new
  git directory below an existing repository's `modules/` or `worktrees/` is
  judged the same way (a person's `git worktree add` meanwhile is kept). A
  deleted `.git` directory cannot be brought back (its objects are not kept):
  that is reported, not restored.

normalize's own data home, when inside the workspace, is not walked: no
program reaches it, and what is there is normalize's doing.

Finding every `.git` walks the whole tree, so the walk remembers each
directory's inode and ctime (which no program can set back) and lists again
only those that changed; a directory changed within `RACY_NS` of a walk is
listed again next time too, since a coarse clock could give a later change
the same ctime.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from normalize import programs
from normalize.fsopen import open_dir
from normalize.task import ActionResult, ResultStatus

__all__ = [
    "Change",
    "GitGuard",
    "GitSnapshot",
    "RepoWalk",
    "describe",
    "fingerprint",
    "protected",
    "restore",
]

PROTECTED = frozenset({".git", ".normalize"})
GIT_FILES = ("config", "config.worktree", "commondir", "gitdir")
GIT_TREES = ("hooks", "info")
NESTED = ("modules", "worktrees")
KEEP_BYTES = 1 << 20  # contents kept for restoring, per file
KEEP_TOTAL = 64 << 20  # contents kept per snapshot; beyond, a stat digest only
MAX_DEPTH = 8  # git directories nested under modules/ and worktrees/
RACY_NS = 2_000_000_000
SAFE_KEYS = re.compile(
    r"core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|worktree|"
    r"precomposeunicode|symlinks)|extensions\.(objectformat|refstorage)|init\.defaultbranch|"
    r"remote\..+\.(url|fetch)|branch\..+\.(remote|merge)")
"""Config keys a new repository may hold and still be kept (what init and clone write)."""


@dataclass(frozen=True)
class Watched:
    """One watched entry as it was: its kind, mode, a digest, and its bytes when small."""

    kind: str  # "dir" | "file" | "link" | "other"
    mode: int = 0
    digest: str = ""
    data: bytes | None = None


@dataclass(frozen=True)
class Change:
    """One thing an action did to protected git state, and what normalize did about it."""

    path: str
    what: str  # "created" | "changed" | "deleted"
    done: str  # "removed" | "restored" | "not restored: …" | "kept (inert)"

    def __str__(self) -> str:
        return f"{self.path} {self.what} ({self.done})"


@dataclass
class _Dir:
    ino: int
    ctime: int  # -1: changed too recently to trust
    children: tuple[str, ...]  # workspace-relative paths of its subdirectories
    found: tuple[str, ...]  # … and of its protected entries


class RepoWalk:
    """Finds every `.git` and `.normalize` under a root, listing only directories that changed."""

    def __init__(self, root: str | os.PathLike[str],
                 skip: tuple[str | os.PathLike[str], ...] = ()) -> None:
        self.root = os.path.realpath(root)
        self._dirs: dict[str, _Dir] = {}
        self.listed = 0  # directories listed by the last walk (the rest were only stat'ed)
        self._skip = {rel for p in skip if (rel := _relative(self.root, p))}

    def find(self) -> list[str]:
        """The workspace-relative paths of every protected entry, not following links."""
        started = time.time_ns()
        seen: dict[str, _Dir] = {}
        found: list[str] = []
        self.listed = 0
        prefix = self.root.rstrip("/") + "/"
        lstat, isdir, cached = os.lstat, stat.S_ISDIR, self._dirs.get
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                st = lstat(prefix + rel if rel else self.root)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            known = cached(rel)
            if known is None or known.ino != st.st_ino or known.ctime != st.st_ctime_ns:
                known = self._list(rel, st, started)
            seen[rel] = known
            found += known.found
            stack += known.children
        self._dirs = seen
        return sorted(found)

    def _list(self, rel: str, st: os.stat_result, started: int) -> _Dir:
        self.listed += 1
        children: list[str] = []
        found: list[str] = []
        path = os.path.join(self.root, rel) if rel else self.root
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.name in PROTECTED:
                        found.append(_join(rel, entry.name))
                    elif entry.is_dir(follow_symlinks=False):
                        child = _join(rel, entry.name)
                        if child not in self._skip:
                            children.append(child)
        except OSError:  # unreadable but searchable (mode 311): git still finds a .git here
            found = [_join(rel, n) for n in sorted(PROTECTED)
                     if os.path.lexists(os.path.join(path, n))]
        racy = st.st_ctime_ns >= started - RACY_NS
        return _Dir(st.st_ino, -1 if racy else st.st_ctime_ns, tuple(children), tuple(found))


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _relative(root: str, path: str | os.PathLike[str]) -> str | None:
    """`path` relative to `root` when inside it, else None."""
    real = os.path.realpath(path)
    return os.path.relpath(real, root) if real.startswith(root.rstrip("/") + "/") else None


def _keep(root: str, rel: str, budget: int = KEEP_BYTES) -> Watched | None:
    """The state of one entry (None: absent), its bytes read without following a link."""
    path = os.path.join(root, rel)
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            return Watched("dir", mode)
        if stat.S_ISLNK(st.st_mode):
            target = os.fsencode(os.readlink(path))
            return Watched("link", mode, hashlib.sha256(target).hexdigest(), target)
        if not stat.S_ISREG(st.st_mode):
            return Watched("other", mode, f"{st.st_mode}:{st.st_ino}")
        if st.st_size > min(budget, KEEP_BYTES):
            stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
            return Watched("file", mode, stamp)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(KEEP_BYTES + 1)
    except OSError:
        return None
    return Watched("file", mode, hashlib.sha256(data).hexdigest(), data)


class _Capture:
    """The watched entries of one protected root."""

    def __init__(self, root: str, budget: list[int]) -> None:
        self.root = root
        self.out: dict[str, Watched] = {}
        self.budget = budget  # bytes still to keep in this snapshot (shared, so a list)

    def add(self, rel: str) -> Watched | None:
        kept = _keep(self.root, rel, self.budget[0])
        if kept is not None:
            self.out[rel] = kept
            self.budget[0] -= len(kept.data or b"")
        return kept

    def tree(self, rel: str) -> None:
        """`rel` and everything below it."""
        kept = self.add(rel)
        if kept is None or kept.kind != "dir":
            return
        for name in sorted(_names(os.path.join(self.root, rel))):
            self.tree(f"{rel}/{name}")

    def gitdir(self, rel: str, depth: int = 0) -> None:
        """The files of a git directory that run code or point elsewhere, and its nested ones."""
        for name in GIT_FILES:
            self.add(f"{rel}/{name}")
        for name in GIT_TREES:
            self.tree(f"{rel}/{name}")
        for name in NESTED:
            self.nested(f"{rel}/{name}", depth + 1)

    def nested(self, rel: str, depth: int) -> None:
        """Git directories below `modules/` or `worktrees/` (a module's name may hold `/`)."""
        if depth > MAX_DEPTH or self.add(rel) is None or self.out[rel].kind != "dir":
            return
        for name in sorted(_names(os.path.join(self.root, rel))):
            child = f"{rel}/{name}"
            names = _names(os.path.join(self.root, child))
            if names & {"HEAD", "config", "commondir"}:
                self.add(child)
                self.gitdir(child, depth)
            elif names:
                self.nested(child, depth + 1)


def _names(path: str) -> set[str]:
    try:
        with os.scandir(path) as entries:
            return {e.name for e in entries}
    except OSError:
        return set()


def fingerprint(root: str, found: list[str]) -> dict[str, Watched]:
    """The watched state of the protected entries `found` (workspace-relative) under `root`."""
    out: dict[str, Watched] = {}
    budget = [KEEP_TOTAL]
    for rel in found:
        capture = _Capture(root, budget)
        kept = capture.add(rel)
        if kept is not None and kept.kind == "dir":
            if rel.rsplit("/", 1)[-1] == ".git":
                capture.gitdir(rel)
            else:
                for name in sorted(_names(os.path.join(root, rel))):
                    capture.tree(f"{rel}/{name}")
        out.update(capture.out)
    return out


@dataclass
class GitSnapshot:
    """The protected roots found and the watched state of each."""

    roots: list[str] = field(default_factory=list)
    kept: dict[str, Watched] = field(default_factory=dict)

    def under(self, rel: str) -> dict[str, Watched]:
        """The watched entries of root `rel` (itself included)."""
        prefix = rel + "/"
        return {p: k for p, k in self.kept.items() if p == rel or p.startswith(prefix)}


def _same(a: Watched, b: Watched) -> bool:
    return (a.kind, a.mode, a.digest) == (b.kind, b.mode, b.digest)


def restore(root: str, before: GitSnapshot, after: GitSnapshot,
            attempt: Attempt | None = None) -> list[Change]:
    """Put every protected root of `before` back as it was; remove new ones unless inert.

    `attempt` does each repair (`_leave`: none, only what changed is told)."""
    _attempt = attempt or _repair
    changes: list[Change] = []
    for rel in sorted(set(before.roots) | set(after.roots)):
        new = after.under(rel)
        if rel not in before.roots:
            if not _inert(root, rel, new):
                changes.append(Change(rel, "created", _attempt(_remove, root, rel, "removed")))
            continue
        old = before.under(rel)
        if rel in new and old[rel].kind != new[rel].kind:  # a directory swapped for a file, …
            changes.append(Change(rel, "replaced", _attempt(_remove, root, rel, "removed")))
            new = {}
        changes += _put_back(root, rel, old, new, _attempt)
    return changes


def _put_back(root: str, rel: str, old: dict[str, Watched],
              new: dict[str, Watched], _attempt: Attempt) -> list[Change]:
    """Undo what changed below one existing root: new entries removed, the rest rewritten."""
    if rel not in new and old[rel].kind == "dir" and rel.endswith(".git"):
        return [Change(rel, "deleted", "not restored: a repository's objects are not kept")]
    changes: list[Change] = []
    gone: list[str] = []
    for path in sorted(p for p in new if p not in old):
        if any(path.startswith(g + "/") for g in gone):
            continue
        if path.rsplit("/", 1)[-1] in NESTED and new[path].kind == "dir":
            continue  # a new `modules/` or `worktrees/`: what is inside is judged one by one
        gone.append(path)
        if _nested_gitdir(path) and _inert(root, path, _below(new, path), named=False):
            continue  # `git worktree add`, a submodule's first clone: a person's doing, kept
        changes.append(Change(path, "created", _attempt(_remove, root, path, "removed")))
    for path in sorted(old):
        if path in new and _same(old[path], new[path]):
            continue
        what = "changed" if path in new else "deleted"
        changes.append(Change(path, what, _attempt(_put, root, path, "restored", old[path])))
    return changes


Attempt = Callable[..., str]
LEFT = "left as found: no program could have made it"


def _leave(*_: object) -> str:
    """No repair: where programs were refused every change (the landlock tier's write guard),
    a change comes from outside the sandbox (the person, another program), and putting the
    state of an earlier moment back would undo theirs."""
    return LEFT


def _repair(act: Callable[..., None], root: str, rel: str, done: str, *args: Watched) -> str:
    """Run one repair; what to report ("removed", "restored", or why it failed)."""
    try:
        act(root, rel, *args)
    except (OSError, ValueError) as exc:
        return f"could not be {done}: {exc.strerror if isinstance(exc, OSError) else exc}"
    return done


def _remove(root: str, rel: str) -> None:
    """Delete `rel` (a whole tree for a directory), no link followed on the way."""
    *parents, name = rel.split("/")
    with open_dir(root, parents) as dfd:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=dfd)
        else:
            os.unlink(name, dir_fd=dfd)


def _put(root: str, rel: str, kept: Watched) -> None:
    """Write one entry back as `kept` says, replacing whatever is there now."""
    if kept.kind == "other" or (kept.kind != "dir" and kept.data is None):
        _remove(root, rel)  # cannot be rebuilt: at least what replaced it goes
        raise ValueError("its content was too large to keep; the changed one was removed")
    *parents, name = rel.split("/")
    with open_dir(root, parents, create=True) as dfd:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if kept.kind == "dir" and stat.S_ISDIR(st.st_mode):
                os.chmod(name, kept.mode, dir_fd=dfd)
                return
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=dfd)
            else:
                os.unlink(name, dir_fd=dfd)
        if kept.kind == "dir":
            os.mkdir(name, 0o700, dir_fd=dfd)
            os.chmod(name, kept.mode, dir_fd=dfd)
        elif kept.kind == "link":
            assert kept.data is not None
            os.symlink(kept.data, name, dir_fd=dfd)
        else:
            assert kept.data is not None
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(name, flags, 0o600, dir_fd=dfd), "wb") as fh:
                fh.write(kept.data)
                os.fchmod(fh.fileno(), kept.mode)


def _nested_gitdir(path: str) -> bool:
    """Whether `path` is a git directory below a repository's `modules/` or `worktrees/`."""
    parts = path.split("/")
    return any(part in NESTED and parts[i - 1] == ".git" for i, part in enumerate(parts)
               if 0 < i < len(parts) - 1)


def _below(entries: dict[str, Watched], rel: str) -> dict[str, Watched]:
    return {p: w for p, w in entries.items() if p == rel or p.startswith(rel + "/")}


def _inert(root: str, rel: str, new: dict[str, Watched], *, named: bool = True) -> bool:
    """Whether a new git directory runs nothing: safe config keys, only sample hooks."""
    if (named and not rel.endswith(".git")) or new.get(rel, Watched("")).kind != "dir":
        return False
    for path, kept in new.items():
        parts = path[len(rel) + 1:].split("/")
        if kept.kind in ("link", "other"):
            return False
        if "hooks" in parts and kept.kind == "file" and not parts[-1].endswith(".sample"):
            return False
        if named and parts[-1] in ("commondir", "gitdir"):  # a worktree's own are expected
            return False
        if parts[-1] in ("config", "config.worktree") and not _safe_config(kept.data, root):
            return False
    return True


def _safe_config(data: bytes | None, root: str) -> bool:
    """Whether a config file, as git itself parses it, holds only `SAFE_KEYS`."""
    if data is None:
        return False
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": os.devnull,
           "LC_ALL": "C"}
    try:  # through the door: trusted git, an empty directory, its own session, a time limit
        proc = programs.run(["git", "config", "--file", "-", "--list", "-z"], timeout=30,
                            untrusted=(root,), input=data, env=env)
    except programs.ProgramError:
        return False
    if not proc.ok:
        return False
    for item in proc.stdout.split(b"\0"):
        key, _, value = item.decode("utf-8", "replace").partition("\n")
        if item and (not SAFE_KEYS.fullmatch(key.lower()) or value.startswith("ext::")):
            return False
    return True


class GitGuard:
    """The engine's check around side-effecting actions: fingerprint before, undo after.

    Actions running together share one baseline, taken when the first of them
    starts; whichever ends first after a change reports it (it cannot know
    which of them made it).
    """

    def __init__(self, workspace: str | os.PathLike[str],
                 skip: tuple[str | os.PathLike[str], ...] = (), *, repair: bool = True) -> None:
        self.walk = RepoWalk(workspace, skip)
        self.repair = repair
        """False where programs cannot change protected paths at all: detect and tell only."""
        self._lock = threading.Lock()
        self._running = 0
        self._base: GitSnapshot | None = None

    def snapshot(self) -> GitSnapshot:
        """The protected roots and their watched state, now."""
        roots = self.walk.find()
        return GitSnapshot(roots, fingerprint(self.walk.root, roots))

    def before(self) -> None:
        """An action is about to start."""
        with self._lock:
            if self._running == 0 or self._base is None:
                self._base = self.snapshot()
            self._running += 1

    def after(self) -> list[Change]:
        """An action ended: undo what changed since the baseline; what was undone."""
        with self._lock:
            self._running = max(0, self._running - 1)
            base = self._base
            now = self.snapshot()
            attempt = _repair if self.repair else _leave
            changes = [] if base is None else restore(self.walk.root, base, now, attempt)
            if self._running == 0:
                self._base = None
            elif changes or (base is not None and base.roots != now.roots):
                self._base = self.snapshot()  # what the running ones are compared with now
            return changes


def describe(changes: list[Change], limit: int = 12) -> str:
    """What the model and the journal are told about undone changes."""
    listed = "; ".join(str(c) for c in changes[:limit])
    more = f"; and {len(changes) - limit} more" if len(changes) > limit else ""
    return ("blocked: this action changed a repository's protected files (a .git's config, "
            "hooks or info, or a .git or .normalize itself), which would run code when the "
            f"person next uses git; normalize undid it: {listed}{more}. Programs may not create "
            "or change these; the action's other changes stand.")


def outside(changes: list[Change]) -> bool:
    """Whether every change was left as found (made outside the sandbox, not repaired)."""
    return bool(changes) and all(c.done == LEFT for c in changes)


def describe_outside(changes: list[Change], limit: int = 12) -> str:
    """What the person is told of protected git state changed during an action from outside."""
    listed = "; ".join(str(c.path) + " " + c.what for c in changes[:limit])
    more = f"; and {len(changes) - limit} more" if len(changes) > limit else ""
    return (f"changed while this action ran, from outside the sandbox (its programs were "
            f"refused every such change), and left as found: {listed}{more}; look at it "
            f"before using git here")


def protected(result: ActionResult, changes: list[Change]) -> ActionResult:
    """`result` turned into a blocked one that says what was undone (its output kept)."""
    data = {**result.data, "protected": [{"path": c.path, "what": c.what, "done": c.done}
                                         for c in changes]}
    return ActionResult(ResultStatus.BLOCKED, result.output, result.preview, result.cache_id,
                        result.duration, result.exit_code, describe(changes), data)
