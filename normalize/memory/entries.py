"""A memory entry, where it belongs (the project's identity), and whether its files changed.

An entry is a short text with its provenance: the task and step it came from,
when, how it was found (`source`: what normalize `observed`, what the
`person` said, what the `model` concluded), why (`why`: the evidence in one
line), and the workspace files it mentions, each with a content hash taken
when it was written. A file whose hash differs now makes the entry stale.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from normalize.serial import Record

STATES = ("inbox", "accepted", "rejected")
SOURCES = ("observed", "person", "model")
SCOPES = ("project", "user")
TEXT_CHARS = 300
"""An entry is a line or two; longer text is cut (memory is not a document store)."""
MAX_FILES = 8
HASH_BYTES = 4 << 20  # files larger than this are hashed by their first 4 MiB and size

_EVIDENCE_RE = re.compile(r"\s*\([^()]*\)\s*\Z")
_PATHISH_RE = re.compile(r"[\w.-]*[\w-](?:/[\w.-]+)*\.[A-Za-z0-9]{1,8}\b|[\w.-]+/[\w./-]*[\w-]")


@dataclass
class MemoryEntry(Record):
    """One memory entry (see the module docstring); `id` is 0 until stored."""

    text: str
    source: str = "observed"
    why: str = ""
    state: str = "inbox"
    scope: str = "project"
    task: str = ""
    step: int = 0
    created: float = field(default_factory=time.time)
    files: dict[str, str] = field(default_factory=dict)  # workspace-relative path -> sha256
    id: int = 0
    stale: bool = False  # not stored: set when retrieved or listed (a file changed since)

    @property
    def key(self) -> str:
        """What two entries saying the same thing share (the dedup key): the text, without
        a closing parenthesis of evidence ("… (`pytest` failed here)")."""
        return normal_text(_EVIDENCE_RE.sub("", self.text))


def normal_text(text: str) -> str:
    """`text` lower-cased with punctuation and repeated spaces gone (for dedup)."""
    return " ".join(re.sub(r"[^\w`./-]+", " ", text.lower()).split())


def clip(text: str) -> str:
    """One entry's text: whitespace folded, at most TEXT_CHARS characters."""
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def file_hash(path: Path) -> str | None:
    """The sha256 of a file's content (its first 4 MiB and its size past that); None: no file."""
    try:
        with path.open("rb") as f:
            data = f.read(HASH_BYTES + 1)
    except OSError:
        return None
    digest = hashlib.sha256(data[:HASH_BYTES])
    if len(data) > HASH_BYTES:
        digest.update(str(path.stat().st_size).encode())
    return digest.hexdigest()


def mentioned_files(text: str, workspace: Path) -> dict[str, str]:
    """The workspace files `text` names (relative paths that exist), with their hashes."""
    found: dict[str, str] = {}
    root = workspace.resolve()
    for word in _PATHISH_RE.findall(text):
        word = word.strip("./") if word.startswith("./") else word.rstrip(".")
        if word in found or word.startswith(("/", "..")) or "/../" in f"/{word}/":
            continue
        path = root / word
        if not path.is_file() or path.is_symlink():
            continue
        digest = file_hash(path)
        if digest is not None:
            found[word] = digest
        if len(found) >= MAX_FILES:
            break
    return found


def is_stale(entry: MemoryEntry, workspace: Path) -> bool:
    """Whether a file the entry names changed (or went away) since it was written."""
    root = workspace.resolve()
    return any(file_hash(root / rel) != digest for rel, digest in entry.files.items())


def project_identity(workspace: Path) -> str:
    """The repository the workspace belongs to: git's common directory, shared by worktrees.

    Read from the files git keeps (`.git` is the directory, or a file naming the
    worktree's git dir, whose `commondir` names the shared one); no git is run.
    A workspace outside any repository is its own project.
    """
    here = workspace.resolve()
    for directory in (here, *here.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return str(dot_git.resolve())
        if dot_git.is_file():
            return str(_common_dir(dot_git))
    return str(here)


def _common_dir(dot_git: Path) -> Path:
    try:
        line = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return dot_git.parent
    if not line.startswith("gitdir:"):
        return dot_git.parent
    git_dir = (dot_git.parent / line.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / common).resolve()


def project_key(workspace: Path) -> str:
    """A short stable name for the project (the hash of its identity)."""
    return hashlib.sha256(project_identity(workspace).encode()).hexdigest()[:16]
