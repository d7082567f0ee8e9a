"""Running ripgrep for `grep`: finding `rg`, the one place it is spawned, reading its lines.

ripgrep is asked for normalize's semantics: hidden files searched, only
`.gitignore` files honoured (no `.ignore`, global or `info/exclude` rules, and
no git repository required), the always-skipped directories and virtual
environments left out, `$` matching before `\\r\\n`. A file is binary from its
first NUL, where ripgrep stops reading it (its default: a binary file is not
read to its end, which on a tree of compiled libraries halves the search):
its matches are dropped, and it is counted when one came before the NUL
(ripgrep then says it "stopped searching binary file after match").

Its output is read as a stream of `PATH NUL LINE:TEXT` records with the text
cut at `MAX_LINE_BYTES` by ripgrep itself (`--max-columns`), and only the first
`keep` lines of a file are held: memory follows what the report can show, not
the size of a line (`rg --json` lists every submatch of a line, about 25 bytes
of JSON per byte of a minified bundle matched by `[a-z]`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from normalize.programs import trusted_program
from normalize.tools.files import ALWAYS_SKIPPED

if TYPE_CHECKING:
    from normalize.tools.base import ToolContext


class Query(Protocol):
    """What a search asks for (a `GrepQuery`)."""

    pattern: str
    ignore_case: bool
    word: bool
    fixed: bool


@dataclass
class FileHits:
    """The matching lines of one file: (line number, text), the first `keep` of them kept.

    `count` is how many lines match; past `keep` they are only counted, so what
    a search holds is bounded by what the report can show.
    """

    rel: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    unkept: int = 0

    @property
    def count(self) -> int:
        return len(self.lines) + self.unkept

    def first(self, n: int) -> list[tuple[int, str]]:
        """The first `n` matching lines."""
        return self.lines[:n]


@dataclass
class Found:
    """What a search found, before formatting: matching files in path order, and what it skipped."""

    files: list[FileHits] = field(default_factory=list)
    skipped_binary: int = 0
    skipped_large: list[str] = field(default_factory=list)
    engine: str = "python"
    note: str = ""
    cut_lines: int = 0
    """Matching lines longer than `MAX_LINE_BYTES`, of which only the start was read."""
    unreadable: list[str] = field(default_factory=list)
    """Files that could not be read (permission denied, gone meanwhile), never skipped silently."""


def path_order(rel: str) -> tuple[str, ...]:
    """Sort key giving the walker's order: directory by directory, names sorted."""
    return tuple(rel.split("/"))


class RgUnsupported(Exception):
    """ripgrep cannot run this pattern (its regex engine rejects it); the Python engine may."""


def find_rg(workspace: Path | None = None) -> str | None:
    """The `rg` binary: beside the interpreter (the `ripgrep` wheel's script), else by the rule.

    Neither place may lie inside `workspace`: a program could have written it
    (`normalize.programs` states the rule for everything normalize runs itself).
    """
    return _find_rg(None if workspace is None else os.path.realpath(workspace))


@lru_cache(maxsize=8)
def _find_rg(workspace: str | None) -> str | None:
    untrusted = () if workspace is None else (workspace,)
    names = ("rg.exe", "rg") if os.name == "nt" else ("rg",)
    places = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    for place in places:
        for name in names:
            candidate = place / name
            real = os.path.realpath(candidate)
            inside = workspace is not None and (real + "/").startswith(workspace + "/")
            if not inside and candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return trusted_program("rg", untrusted)


def spawn_rg(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    """Start ripgrep, the one program `grep` starts, able to read only beneath `cwd`.

    ripgrep opens files by path, so a directory swapped for a symlink while it
    searches would lead it outside; Landlock confines its reads to the
    workspace (and the system libraries it loads), whatever its paths say.
    Landlock is all it needs (not the namespaces a program's sandbox tries
    first, so no trial run): without it, or when entering it fails in the
    child, `RgUnconfined` is raised and grep searches in Python.
    """
    from normalize.faults import sandbox_disabled
    from normalize.sandbox import landlock

    abi = landlock.abi_version()
    if sandbox_disabled() or abi < 1:
        raise RgUnconfined("the sandbox is unavailable")
    ruleset = landlock.Ruleset(abi, deny_tcp=True)
    try:
        ruleset.allow(cwd, landlock.ACCESS_READ)
        ruleset.allow(argv[0], landlock.EXECUTE | landlock.READ_FILE)
        ruleset.allow_all(RG_SYSTEM_PATHS, landlock.ACCESS_READ)
        restrict, fd = landlock.restrictor(), ruleset.fd
        return subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(fd,), preexec_fn=lambda: restrict(fd),
        )
    except subprocess.SubprocessError as exc:  # the child could not enter Landlock
        raise RgUnconfined(f"ripgrep could not be confined ({exc})") from None
    finally:
        ruleset.close()


RG_SYSTEM_PATHS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache")
"""What the dynamic loader reads to start ripgrep (no secrets there)."""


class RgUnconfined(Exception):
    """ripgrep cannot be confined to the workspace here."""


def rg_argv(rg: str, query: Query, target: str, venvs: list[str]) -> list[str]:
    """The command line for `query` over `target` (relative to the workspace root)."""
    argv = [rg, "--no-config", "--hidden", "--crlf", "--no-require-git",
            "--no-ignore-dot", "--no-ignore-global", "--no-ignore-exclude",
            "--null", "--line-number", "--with-filename", "--no-heading", "--color=never",
            f"--max-columns={MAX_LINE_BYTES}", "--max-columns-preview"]  # fmt: skip
    if query.ignore_case:
        argv.append("--ignore-case")
    if query.word:
        argv.append("--word-regexp")
    if query.fixed:
        argv.append("--fixed-strings")
    for name in sorted(ALWAYS_SKIPPED):
        argv += ["--glob", f"!{name}"]
    for venv in venvs:
        argv += ["--glob", f"!/{venv}"]
    return [*argv, "--regexp", query.pattern, "--", target]


def _venvs(root: Path) -> list[str]:
    """Virtual environments (a `pyvenv.cfg` inside) one or two levels down, as the walker skips."""
    found: list[str] = []
    try:
        for first in os.scandir(root):
            if not first.is_dir(follow_symlinks=False) or first.name in ALWAYS_SKIPPED:
                continue
            if os.path.exists(os.path.join(first.path, "pyvenv.cfg")):
                found.append(first.name)
                continue
            try:
                for second in os.scandir(first.path):
                    cfg = os.path.join(second.path, "pyvenv.cfg")
                    if second.is_dir(follow_symlinks=False) and os.path.exists(cfg):
                        found.append(f"{first.name}/{second.name}")
            except OSError:
                continue
    except OSError:
        pass
    return found


MAX_LINE_BYTES = 2000
"""ripgrep prints at most this much of a matching line (the report shows 300 characters)."""
_CUT = re.compile(rb" \[\.\.\. (?:omitted end of long line|\d+ more matches?)\]\r?$")
_BINARY = re.compile(rb'(?P<path>.*): (?:binary file matches|WARNING: stopped searching binary '
                     rb'file after match) \(found "\\0" byte around offset \d+\)', re.DOTALL)
_CHUNK = 1 << 16


def _records(fd: int) -> Iterator[bytes]:
    """ripgrep's output split at newlines, read in chunks (a record is at most a cut line)."""
    rest = b""
    while chunk := os.read(fd, _CHUNK):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


class _Collector:
    """Matching lines per file as ripgrep streams them; binary files dropped at the end."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.files: dict[bytes, FileHits] = {}
        self.binary: set[bytes] = set()
        self.cut = 0
        self.pending = b""  # a path holding newlines, split across records

    def add(self, record: bytes) -> None:
        head, nul, tail = record.partition(b"\0")
        if not nul:  # a notice, or the first part of a path holding a newline
            notice = _BINARY.fullmatch(self.pending + record)
            if notice is not None:
                self.binary.add(notice["path"])
                self.pending = b""
            else:
                self.pending += record + b"\n"
            return
        path, self.pending = self.pending + head, b""
        number, _, text = tail.partition(b":")
        hits = self.files.get(path)
        if hits is None:
            rel = os.path.normpath(os.fsdecode(path)).replace(os.sep, "/")
            hits = self.files[path] = FileHits(rel)
        if len(hits.lines) >= self.keep:
            hits.unkept += 1
            return
        cut = _CUT.search(text)
        if cut is not None:
            self.cut += 1
            text = text[:cut.start()] + "\u2026".encode()
        line = text.decode("utf-8", "replace").removesuffix("\r")
        hits.lines.append((int(number), line))

    def finish(self, found: Found) -> None:
        found.files = [hits for path, hits in self.files.items() if path not in self.binary]
        found.skipped_binary = len(self.binary)
        found.cut_lines = self.cut


def search_rg(rg: str, query: Query, start: Path, ctx: ToolContext, keep: int) -> Found:
    """Every match of `query` under `start`, found by ripgrep, in the walker's path order.

    Of each file only the first `keep` matching lines are held; the rest are counted.
    """
    root = ctx.guard.root
    rel_start = "." if start == root else ctx.guard.relative(start)
    process = spawn_rg(rg_argv(rg, query, rel_start, _venvs(root)), root)
    found = Found(engine="rg")
    collect = _Collector(keep)
    assert process.stdout is not None and process.stderr is not None
    messages = _Drain(process.stderr)  # read beside stdout: a full pipe would stop ripgrep
    try:
        for record in _records(process.stdout.fileno()):
            if ctx.cancel.cancelled:
                process.kill()
                break
            collect.add(record)
    finally:
        code = process.wait()
        stderr = messages.text()
        process.stdout.close()
        process.stderr.close()
    said = _OS_ERROR.sub("", stderr)  # what is left once the unreadable files are counted
    if code == 2 and not collect.files and "regex" in said.lower():
        raise RgUnsupported(_first_error_line(said))
    collect.finish(found)
    found.unreadable = sorted(_unreadable(stderr), key=path_order)
    found.files.sort(key=lambda hits: path_order(hits.rel))
    return found


_OS_ERROR = re.compile(r"^rg: (?P<path>.+?): [^:]+ \(os error \d+\)$", re.MULTILINE)
MAX_MESSAGES = 1 << 20  # of ripgrep's messages, what is kept to count (a bounded memory)


class _Drain:
    """ripgrep's messages, read on a thread of their own, the first `MAX_MESSAGES` kept."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.kept = bytearray()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True,
                                       name="normalize-rg-stderr")
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := os.read(stream.fileno(), _CHUNK):
            if len(self.kept) < MAX_MESSAGES:
                self.kept += chunk

    def text(self) -> str:
        self.thread.join(timeout=10)
        return self.kept.decode("utf-8", "replace")


def _unreadable(stderr: str) -> list[str]:
    """The files ripgrep says it could not read (`rg: PATH: Permission denied (os error 13)`)."""
    return [os.path.normpath(m["path"]).replace(os.sep, "/") for m in _OS_ERROR.finditer(stderr)]


def _first_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    useful = [line for line in lines if line.startswith("error:")] or lines
    return useful[-1] if useful else "rejected"
