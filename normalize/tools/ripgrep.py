"""Running ripgrep for `grep`: finding `rg`, the one place it is spawned, reading `rg --json`.

ripgrep is asked for normalize's semantics: hidden files searched, only
`.gitignore` files honoured (no `.ignore`, global or `info/exclude` rules, and
no git repository required), the always-skipped directories and virtual
environments left out, `$` matching before `\\r\\n`. Binary files are decided
over the whole file: matches are held per file until its `end` message, and a
file ripgrep found a NUL in (`binary_offset`) is dropped and counted.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from normalize.helpers import trusted_program
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
    """The matching lines of one file: (line number, text), decoded only when shown.

    `raw` holds ripgrep's undecoded `match` messages; `count` is how many
    lines match, whichever form holds them.
    """

    rel: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.lines) + len(self.raw)

    def first(self, n: int) -> list[tuple[int, str]]:
        """The first `n` matching lines."""
        take = max(0, n - len(self.lines))
        self.lines += [decode_match(raw) for raw in self.raw[:take]]
        del self.raw[:take]
        return self.lines[:n]


@dataclass
class Found:
    """What a search found, before formatting: matching files in path order, and what it skipped."""

    files: list[FileHits] = field(default_factory=list)
    skipped_binary: int = 0
    skipped_large: list[str] = field(default_factory=list)
    engine: str = "python"
    note: str = ""


def path_order(rel: str) -> tuple[str, ...]:
    """Sort key giving the walker's order: directory by directory, names sorted."""
    return tuple(rel.split("/"))


class RgUnsupported(Exception):
    """ripgrep cannot run this pattern (its regex engine rejects it); the Python engine may."""


def find_rg(workspace: Path | None = None) -> str | None:
    """The `rg` binary: beside the interpreter (the `ripgrep` wheel's script), else by the rule.

    Neither place may lie inside `workspace`: a program could have written it
    (`normalize.helpers` states the rule for everything normalize runs itself).
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
    Without Landlock, `RgUnconfined` is raised and grep searches in Python.
    """
    from normalize.sandbox import landlock
    from normalize.sandbox.probe import probe

    if not probe().available:
        raise RgUnconfined("the sandbox is unavailable")
    ruleset = landlock.Ruleset(landlock.abi_version(), deny_tcp=True)
    try:
        ruleset.allow(cwd, landlock.ACCESS_READ)
        ruleset.allow(argv[0], landlock.EXECUTE | landlock.READ_FILE)
        ruleset.allow_all(RG_SYSTEM_PATHS, landlock.ACCESS_READ)
        restrict, fd = landlock.restrictor(), ruleset.fd
        return subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(fd,), preexec_fn=lambda: restrict(fd),
        )
    finally:
        ruleset.close()


RG_SYSTEM_PATHS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache")
"""What the dynamic loader reads to start ripgrep (no secrets there)."""


class RgUnconfined(Exception):
    """ripgrep cannot be confined to the workspace here."""


def rg_argv(rg: str, query: Query, target: str, venvs: list[str]) -> list[str]:
    """The command line for `query` over `target` (relative to the workspace root)."""
    argv = [rg, "--json", "--no-config", "--hidden", "--binary", "--crlf", "--no-require-git",
            "--no-ignore-dot", "--no-ignore-global", "--no-ignore-exclude",
            "--no-messages"]  # fmt: skip
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


def _text(field: dict[str, Any]) -> str:
    if "text" in field:
        return str(field["text"])
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", "replace")


def decode_match(raw: bytes) -> tuple[int, str]:
    """A `match` message → (line number, the line without its line ending)."""
    data = json.loads(raw)["data"]
    return int(data["line_number"]), _text(data["lines"]).rstrip("\n").removesuffix("\r")


def search_rg(rg: str, query: Query, start: Path, ctx: ToolContext) -> Found:
    """Every match of `query` under `start`, found by ripgrep, in the walker's path order."""
    root = ctx.guard.root
    rel_start = "." if start == root else ctx.guard.relative(start)
    process = spawn_rg(rg_argv(rg, query, rel_start, _venvs(root)), root)
    found = Found(engine="rg")
    current: list[bytes] = []
    assert process.stdout is not None
    try:
        for raw in process.stdout:
            if ctx.cancel.cancelled:
                process.kill()
                break
            kind = raw[9:14]  # b'{"type":"match"…': the type without a full parse
            if kind == b"begin":
                current = []
            elif kind == b"match":
                current.append(raw)  # decoded only if shown
            elif kind.startswith(b"end"):
                data = json.loads(raw)["data"]
                if data.get("binary_offset") is not None:
                    found.skipped_binary += 1
                elif current:
                    rel = os.path.normpath(_text(data["path"])).replace(os.sep, "/")
                    found.files.append(FileHits(rel, raw=current))
                current = []
    finally:
        stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
        code = process.wait()
        process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    if code == 2 and not found.files and "regex" in stderr.lower():
        raise RgUnsupported(_first_error_line(stderr))
    found.files.sort(key=lambda hits: path_order(hits.rel))
    return found


def _first_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    useful = [line for line in lines if line.startswith("error:")] or lines
    return useful[-1] if useful else "rejected"
