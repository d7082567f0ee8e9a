"""A workspace's shadow object store: git plumbing with normalize's own GIT_DIR and index.

One shadow repository per workspace lives under the data home
(`workspaces/HASH/`, keyed by the workspace's resolved path), so the objects
of every task in that workspace are shared. The user's `.git` is never read
for objects, never written: git runs with `GIT_DIR`, `GIT_INDEX_FILE` and
`GIT_WORK_TREE` pointing here, no system or global config, no hooks, no
fsmonitor, pager, external diff, textconv, ssh command, credential helper or
transport, and every other `GIT_*` variable of the caller's environment
dropped. git itself is found by `normalize.programs` (never from a `PATH`
entry inside the workspace), and runs with that rule's directories as `PATH`.
The workspace's `.gitignore` files (and its `.git/info/exclude`) are
honoured; ignored files, files over the size bound, anything under a `.git/`
or `.normalize/` and the data home itself are never stored.

A snapshot is incremental: the index keeps each file's stat data between
checkpoints, so only the paths git lists as new (`ls-files --others`) or
changed (`diff-files`) are looked at and hashed. A path that vanished, turned
into a FIFO or cannot be read is left out, never fatal. A first snapshot of a
big workspace streams its blobs through `git fast-import` into one pack
(thousands of loose objects cost seconds on a slow disk).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import subprocess
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normalize.errors import NormalizeError
from normalize.programs import GIT_HARDENED, git_flags, trusted_path, trusted_program

MB = 1024 * 1024
PRIVATE = 0o077  # the umask git runs with: the store is owner-only
BULK = 64  # more new or changed files than this go through fast-import
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"  # store bytes as they are
CONFIG = GIT_HARDENED  # (the one definition of hardened git: the door's)
UNPROCESSABLE = re.compile(r"(?:Unable to process path|error: open\(\"?|unable to index file '?)"
                           r"(?P<path>[^'\"\n]+?)['\"]?(?:\)|$|:)", re.MULTILINE)


class CheckpointError(NormalizeError):
    """The shadow store could not do what was asked (git missing, a git command failed)."""


@dataclass(frozen=True)
class Settings:
    """How checkpoints behave; each has an environment variable (NORMALIZE_CHECKPOINT_*)."""

    enabled: bool = True
    max_file_bytes: int = 10 * MB
    keep_days: float = 30.0
    keep_tasks: int = 200

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """`NORMALIZE_CHECKPOINTS=off`, `…_MAX_FILE_MB`, `…_KEEP_DAYS`, `…_KEEP_TASKS`."""
        environ = dict(os.environ) if env is None else env
        default = cls()

        def number(name: str, fallback: float) -> float:
            raw = environ.get(f"NORMALIZE_CHECKPOINT_{name}", "").strip()
            try:
                return float(raw) if raw else fallback
            except ValueError:
                raise CheckpointError(f"NORMALIZE_CHECKPOINT_{name}={raw!r}: not a number") \
                    from None

        enabled = environ.get("NORMALIZE_CHECKPOINTS", "on").strip().lower() not in (
            "0", "off", "no", "false")
        return cls(enabled=enabled,
                   max_file_bytes=int(number("MAX_FILE_MB", default.max_file_bytes / MB) * MB),
                   keep_days=number("KEEP_DAYS", default.keep_days),
                   keep_tasks=int(number("KEEP_TASKS", default.keep_tasks)))


@dataclass
class Snapshot:
    """The result of recording the workspace: its tree and what was left out."""

    tree: str
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why
    base: str | None = None  # the tree the index held before, when known
    counts: dict[str, tuple[int, int]] | None = None  # changes since `base`, when known


@dataclass(frozen=True)
class Entry:
    """One file of a tree: its mode and blob id."""

    mode: str
    sha: str

    @property
    def link(self) -> bool:
        return self.mode == "120000"


def shadow_root(home: Path, workspace: Path) -> Path:
    """Where the shadow store of `workspace` lives under the data home."""
    key = hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:20]
    return home / "workspaces" / key


def dot_git(rel: str) -> bool:
    """Whether git refuses `rel` as a path into a `.git`: any component that is `.git` in any
    case, with trailing dots or spaces, an NTFS stream (`.git::$DATA`) or the short name
    `git~1`; a backslash separates components too (git's `core.protectNTFS`, on by default)."""
    for part in re.split(r"[/\\]", rel):
        bare = part.split(":", 1)[0].rstrip(". ").casefold()
        if bare in (".git", "git~1"):
            return True
    return False


def write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def shown(path: str) -> str:
    """A path as text that can be written anywhere (a name that is not UTF-8 gets `�`)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def blob_id(data: bytes) -> str:
    """The git blob id of `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def read_current(path: Path) -> tuple[str, bytes] | None:
    """A workspace file as git would store it: (mode, content); None if absent or not a file."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return "120000", os.fsencode(os.readlink(path))
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = fh.read()
    except OSError:
        return None
    return ("100755" if st.st_mode & 0o111 else "100644"), data


class ShadowRepo:
    """The shadow git repository of one workspace."""

    def __init__(self, workspace: Path, home: Path, settings: Settings | None = None) -> None:
        self.workspace = workspace.resolve()
        self.home = home
        self.settings = settings or Settings()
        self.root = shadow_root(home, self.workspace)
        self.git_dir = self.root / "git"
        self.index = self.root / "index"
        git = trusted_program("git", (self.workspace, home))
        if git is None:
            raise CheckpointError("git is not installed (in a system directory or a PATH entry "
                                  "outside the workspace): workspace checkpoints need it")
        self.git = git
        self._env: dict[str, str] | None = None
        self._excluded = self._excluded_prefixes()
        self._index_tree: str | None = None
        self._stamp: tuple[int, int, int] | None = None

    # -- running git -----------------------------------------------------

    def env(self, *, index: str | None = None) -> dict[str, str]:
        """The environment git runs in: ours only, nothing of the user's git set-up."""
        if self._env is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.workspace),
                       GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                       GIT_TERMINAL_PROMPT="0", GIT_LITERAL_PATHSPECS="1", GIT_OPTIONAL_LOCKS="0",
                       GIT_NO_REPLACE_OBJECTS="1", GIT_ATTR_NOSYSTEM="1", LC_ALL="C",
                       GIT_CEILING_DIRECTORIES=str(self.workspace.parent),
                       GIT_PAGER="cat", PAGER="cat",
                       PATH=trusted_path((self.workspace, self.home)))
            env.pop("GIT_ALTERNATE_OBJECT_DIRECTORIES", None)
            self._env = env
        env = dict(self._env)
        env["GIT_INDEX_FILE"] = index or str(self.index)
        return env

    def _hardened(self) -> list[str]:
        """git and the `-c` settings that turn off everything it could start by itself."""
        return [self.git, *git_flags()]

    def _argv(self, args: Iterable[str]) -> list[str]:
        excludes = self._user_excludes()
        return [*self._hardened(), "-c", f"core.excludesFile={excludes or os.devnull}", *args]

    def run(self, *args: str, input: bytes | None = None, index: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run one git command in the shadow repository."""
        proc = subprocess.run(self._argv(args), input=input, cwd=self.workspace,
                              env=self.env(index=index), capture_output=True, check=False,
                              umask=PRIVATE)
        if check and proc.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed: "
                                  f"{proc.stderr.decode(errors='replace').strip()[:300]}")
        return proc

    def popen(self, *args: str, index: str | None = None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self._argv(args), cwd=self.workspace, env=self.env(index=index),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, umask=PRIVATE)

    def _user_excludes(self) -> str | None:
        """The workspace repository's `info/exclude`, when the workspace is a git repository."""
        dot = self.workspace / ".git"
        try:
            if dot.is_dir():
                path = dot / "info" / "exclude"
            elif dot.is_file():
                text = dot.read_text(errors="replace").strip()
                gitdir = Path(text.removeprefix("gitdir:").strip())
                gitdir = gitdir if gitdir.is_absolute() else (self.workspace / gitdir)
                common = gitdir / "commondir"
                if common.is_file():
                    gitdir = gitdir / common.read_text().strip()
                path = gitdir / "info" / "exclude"
            else:
                return None
            return str(path) if path.is_file() else None
        except OSError:
            return None

    def _excluded_prefixes(self) -> tuple[str, ...]:
        """Paths under the workspace never stored: normalize's own data home, if inside."""
        out = [".normalize/"]
        for place in (self.home, self.root):
            with contextlib.suppress(ValueError, OSError):
                rel = place.resolve().relative_to(self.workspace).as_posix()
                if rel != ".":
                    out.append(rel.rstrip("/") + "/")
        return tuple(out)

    # -- the repository --------------------------------------------------

    def ensure(self) -> None:
        """Create the shadow repository on first use (owner-only: it holds task state)."""
        if (self.git_dir / "HEAD").is_file():
            return
        self.private_dirs()
        env = {k: v for k, v in self.env().items() if k not in ("GIT_DIR", "GIT_WORK_TREE",
                                                               "GIT_INDEX_FILE")}
        proc = subprocess.run([*self._hardened(), "init", "-q", "--bare", "--template=",
                               str(self.git_dir)], env=env, capture_output=True, check=False,
                              umask=PRIVATE)
        if proc.returncode != 0:
            raise CheckpointError(f"cannot create the shadow store {self.git_dir}: "
                                  f"{proc.stderr.decode(errors='replace').strip()[:300]}")
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, exist_ok=True)
        excluded = "".join(f"/{p}\n" for p in self._excluded) + ".git\n"
        write_private(info / "exclude", excluded.encode())
        write_private(info / "attributes", ATTRIBUTES.encode())
        write_private(self.root / "workspace", os.fsencode(self.workspace) + b"\n")

    def private_dirs(self) -> None:
        """The store's directories, owner-only (it holds file contents and task state)."""
        for folder in (self.home, self.root.parent, self.root):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root.parent, 0o700)
        os.chmod(self.root, 0o700)

    def _keep(self, rel: str) -> bool:
        return not dot_git(rel) and ".normalize" not in rel.split("/") and \
            not rel.startswith(self._excluded)

    def snapshot(self, *, full: bool = False) -> Snapshot:
        """Bring the shadow index up to date with the workspace; the tree it now holds.

        `full` also drops indexed files that have become ignored since (the
        first checkpoint of a task does it; a changed `.gitignore` does too).
        When this process wrote the index last, the snapshot also says what
        changed since (`base`, `counts`), so no tree diff is needed.
        """
        self.ensure()
        base = self._index_tree if self._index_stamp() == self._stamp else None
        outputs: list[bytes] = []
        # both listings run at once; leaving the block reaps both, also when the first fails
        with self.popen("ls-files", "-z", "--others", "--exclude-standard") as others, \
                self.popen("diff-files", "--numstat", "-z", "--no-renames", "--no-ext-diff",
                           "--no-textconv", "--ignore-submodules=all") as changed:
            for proc in (others, changed):
                out, err = proc.communicate()
                status = proc.returncode
                if status != 0 and proc is changed:  # a FIFO where a file was cannot be counted
                    names = self.run("diff-files", "--name-only", "-z", "--no-renames",
                                     "--ignore-submodules=all", check=False)
                    out = b"".join(b"-\t-\t" + p + b"\0" for p in names.stdout.split(b"\0") if p)
                    status, err, base = names.returncode, names.stderr, None
                if status != 0:
                    raise CheckpointError(f"git cannot list the workspace: "
                                          f"{err.decode(errors='replace').strip()[:300]}")
                outputs.append(out)
        new = [os.fsdecode(p) for p in outputs[0].split(b"\0") if p]
        counts: dict[str, tuple[int, int]] | None = {} if base is not None else None
        modified: list[str] = []
        for record in outputs[1].split(b"\0"):
            if not record:
                continue
            added, removed, raw = record.split(b"\t", 2)
            path = os.fsdecode(raw)
            modified.append(path)
            if counts is not None and ((added, removed) != (b"0", b"0")
                                       or not os.path.lexists(self.workspace / path)):
                counts[path] = (-1, -1) if added == b"-" else (int(added), int(removed))
        listed = new + modified
        if not listed and not full and base is not None:
            return Snapshot(base, base=base, counts={})
        if full or any(p == ".gitignore" or p.endswith("/.gitignore") for p in listed):
            listing = self.run("ls-files", "-z", "--cached", "--ignored", "--exclude-standard")
            ignored = [os.fsdecode(p) for p in listing.stdout.split(b"\0") if p]
        else:
            ignored = []
        add: list[str] = []
        drop: list[str] = list(ignored)
        skipped: dict[str, str] = {}
        fresh = set(new)
        if len(fresh) > BULK:
            counts = None  # a tree diff counts a big import faster than reading it here
        for rel in dict.fromkeys(listed):
            if rel.endswith("/"):
                continue  # a nested repository: its own .git keeps it
            why = None if self._keep(rel) else "excluded"
            why = why or self._unfit(rel)
            if why is None:
                add.append(rel)
                if rel in fresh and counts is not None:
                    counts[rel] = self._lines(rel)
                continue
            drop.append(rel)
            if why not in ("gone", "excluded"):
                skipped[rel] = why
            if rel not in fresh and why != "gone":
                counts = None  # an indexed file left out now: let a tree diff count it
        if ignored:
            counts = None
        if len(add) > BULK:
            self._bulk_load(add)
        self._update(add, skipped)
        if drop:
            self._update(drop, skipped, force_remove=True)
        tree = self.run("write-tree").stdout.decode().strip()
        self._index_tree, self._stamp = tree, self._index_stamp()
        return Snapshot(tree, skipped, base=base, counts=counts)

    def _index_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.index)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _lines(self, rel: str) -> tuple[int, int]:
        """(added, removed) lines of a new file: all added; (-1, -1) when binary."""
        current = read_current(self.workspace / rel)
        if current is None:
            return 0, 0
        data = current[1]
        if b"\0" in data[:8000]:
            return -1, -1
        return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0), 0

    def _unfit(self, rel: str) -> str | None:
        """Why a listed path is not stored (None: store it; "gone": it vanished)."""
        try:
            st = os.lstat(self.workspace / rel)
        except FileNotFoundError:
            return "gone"
        except OSError as exc:
            return exc.strerror or "unreadable"
        if stat.S_ISLNK(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            return "gone" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        if st.st_size > self.settings.max_file_bytes:
            return f"{st.st_size / MB:.1f} MB, over the {self.settings.max_file_bytes / MB:g} MB " \
                   "limit"
        if not os.access(self.workspace / rel, os.R_OK):
            return "unreadable"
        return None

    def _bulk_load(self, paths: list[str]) -> None:
        """Write many blobs into one pack (update-index then finds them stored)."""
        proc = subprocess.Popen(self._argv(["fast-import", "--quiet", "--done"]),
                                cwd=self.workspace, env=self.env(), stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                umask=PRIVATE)
        assert proc.stdin is not None
        try:
            for rel in paths:
                current = read_current(self.workspace / rel)
                if current is None:
                    continue
                data = current[1]
                proc.stdin.write(b"blob\ndata %d\n" % len(data))
                proc.stdin.write(data)
                proc.stdin.write(b"\n")
            proc.stdin.write(b"done\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass
        proc.wait()  # a failure is not fatal: update-index hashes them one by one

    def _update(self, paths: list[str], skipped: dict[str, str], *,
                force_remove: bool = False) -> None:
        """`update-index` over `paths`; a path git cannot process is left out, not fatal."""
        flags = ["--force-remove"] if force_remove else ["--add", "--remove"]
        todo = list(paths)
        for _ in range(50):
            if not todo:
                return
            data = b"".join(os.fsencode(p) + b"\0" for p in todo)
            proc = self.run("update-index", *flags, "-z", "--stdin", input=data, check=False)
            if proc.returncode == 0:
                return
            text = proc.stderr.decode(errors="replace")
            bad = {m.group("path").strip() for m in UNPROCESSABLE.finditer(text)} & set(todo)
            if not bad:
                raise CheckpointError(f"git update-index failed: {text.strip()[:300]}")
            for rel in bad:
                skipped[rel] = "git cannot read it"
            todo = [p for p in todo if p not in bad]
            if not force_remove:  # take what can no longer be read out of the index too
                self.run("update-index", "--force-remove", "-z", "--stdin",
                         input=b"".join(os.fsencode(p) + b"\0" for p in bad), check=False)
        raise CheckpointError("git update-index kept failing on unreadable paths")

    # -- objects and refs, written directly --------------------------------

    def write_object(self, kind: str, data: bytes) -> str:
        """Store one loose object; its id."""
        raw = f"{kind} {len(data)}\0".encode() + data
        sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        path = self.git_dir / "objects" / sha[:2] / sha[2:]
        if path.exists():
            return sha
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.parent / f".tmp-{os.getpid()}-{sha[2:10]}"
        write_private(tmp, zlib.compress(raw, 1))
        os.replace(tmp, path)
        return sha

    def make_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        """A tree of `name -> (mode, sha)` entries."""
        def key(item: tuple[str, tuple[str, str]]) -> bytes:
            name, (mode, _) = item
            return os.fsencode(name) + (b"/" if mode == "40000" else b"")

        body = b"".join(f"{mode} ".encode() + os.fsencode(name) + b"\0" + bytes.fromhex(sha)
                        for name, (mode, sha) in sorted(entries.items(), key=key))
        return self.write_object("tree", body)

    def commit(self, tree: str, parent: str | None, meta: dict[str, Any]) -> str:
        """A commit of `tree` whose message is `meta` as JSON."""
        now = int(time.time())
        who = f"normalize <normalize@localhost> {now} +0000"
        head = f"tree {tree}\n" + (f"parent {parent}\n" if parent else "")
        text = f"{head}author {who}\ncommitter {who}\n\n" + \
            json.dumps(meta, sort_keys=True) + "\n"  # ASCII: a path may not be UTF-8
        return self.write_object("commit", text.encode())

    def ref_path(self, name: str) -> Path:
        return self.git_dir / name

    def read_ref(self, name: str) -> str | None:
        """A ref's commit id (loose or packed), None when it does not exist."""
        try:
            return self.ref_path(name).read_text().strip() or None
        except FileNotFoundError:
            pass
        except OSError:
            return None
        proc = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False)
        return proc.stdout.decode().strip() or None

    def set_ref(self, name: str, sha: str) -> None:
        path = self.ref_path(name)
        for folder in reversed(path.relative_to(self.git_dir).parents[:-1]):
            (self.git_dir / folder).mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        write_private(tmp, f"{sha}\n".encode())
        os.replace(tmp, path)

    # -- reading ----------------------------------------------------------

    def log(self, ref: str) -> list[tuple[str, dict[str, Any]]]:
        """The commits of `ref`, oldest first, with their metadata."""
        proc = self.run("log", "-z", "--format=%H%n%B", ref, "--")
        out: list[tuple[str, dict[str, Any]]] = []
        for chunk in proc.stdout.decode(errors="replace").split("\0"):
            if not chunk.strip():
                continue
            sha, _, body = chunk.partition("\n")
            try:
                meta = json.loads(body)
            except ValueError:
                continue
            if isinstance(meta, dict):
                out.append((sha.strip(), meta))
        out.reverse()
        return out

    def entries(self, tree: str, paths: Iterable[str] | None = None) -> dict[str, Entry]:
        """`path -> Entry` for the files of `tree` (only `paths`, when given)."""
        args = ["ls-tree", "-r", "-z", "--full-tree", tree]
        wanted = list(paths) if paths is not None else None
        if wanted is not None:
            if not wanted:
                return {}
            args += ["--", *wanted]
        proc = self.run(*args)
        out: dict[str, Entry] = {}
        for record in proc.stdout.split(b"\0"):
            if not record:
                continue
            info, _, path = record.partition(b"\t")
            mode, kind, sha = info.decode().split()
            if kind == "blob":
                out[os.fsdecode(path)] = Entry(mode, sha)
        return out

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]:
        """The content of blobs, read in one `cat-file --batch`."""
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return {}
        proc = self.run("cat-file", "--batch", input="".join(f"{s}\n" for s in wanted).encode())
        data, out, pos = proc.stdout, {}, 0
        for sha in wanted:
            end = data.index(b"\n", pos)
            header = data[pos:end].split()
            if len(header) < 3:
                raise CheckpointError(f"object {sha} is missing from the shadow store")
            size = int(header[2])
            out[sha] = data[end + 1:end + 1 + size]
            pos = end + 1 + size + 1
        return out

    def numstat(self, old: str, new: str) -> dict[str, tuple[int, int]]:
        """`path -> (added, removed)` lines between two trees (-1, -1 for binary files)."""
        if old == new:
            return {}
        proc = self.run("diff-tree", "-r", "-z", "--numstat", "--no-renames", "--no-ext-diff",
                        "--no-textconv", old, new)
        out: dict[str, tuple[int, int]] = {}
        fields = proc.stdout.split(b"\0")
        for record in fields:
            if not record:
                continue
            added, removed, path = record.split(b"\t", 2)
            out[os.fsdecode(path)] = (int(added) if added != b"-" else -1,
                                      int(removed) if removed != b"-" else -1)
        return out

    def patch(self, old: str, new: str, paths: Iterable[str] | None = None) -> str:
        """The unified diff between two trees (only `paths`, when given)."""
        args = ["diff-tree", "-p", "-r", "--no-renames", "--no-ext-diff", "--no-textconv",
                "--no-color", old, new]
        if paths is not None:
            wanted = list(paths)
            if not wanted:
                return ""
            args += ["--", *wanted]
        return self.run(*args).stdout.decode(errors="replace")
