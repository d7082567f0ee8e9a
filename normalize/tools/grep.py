"""`grep`: a regex search over the workspace, the way git sees it.

Output is one match a line, `path:line: text`, paths relative to the
workspace, in path order; `.gitignore`d files and binaries (a NUL byte
anywhere in the file) are skipped. Past the cap, a last line counts the
matches left out.

The search runs on ripgrep (`rg --json`, from the `ripgrep` wheel) when it
can be found; patterns ripgrep's regex engine rejects (look-around,
back-references) and machines without `rg` use the Python engine, which
also skips files over a size limit and names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from normalize.errors import ToolError
from normalize.fsopen import read_bytes
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext
from normalize.tools.files import walk
from normalize.tools.ripgrep import (
    MAX_LINE_BYTES,
    FileHits,
    Found,
    RgUnconfined,
    RgUnsupported,
    find_rg,
    search_rg,
)

MAX_TEXT = 300
"""A matching line longer than this is cut with `…`."""

_USAGE = "grep PATTERN [PATH] [-i] [-l] [-w] [-F] [--max N]"
_OPTION = re.compile(r"-[A-Za-z]|--[a-z][a-z-]*(=.*)?")
_NO_OP_FLAGS = frozenset({"-n", "-r", "-R", "-E", "--line-number", "--recursive"})


@dataclass
class GrepQuery:
    """A parsed `grep` command."""

    pattern: str
    path: str = "."
    ignore_case: bool = False
    files_only: bool = False
    word: bool = False
    fixed: bool = False
    max_matches: int | None = None

    @classmethod
    def parse(cls, args: list[str]) -> GrepQuery:
        positional: list[str] = []
        flags: dict[str, bool] = {}
        max_matches: int | None = None
        words = iter(args)
        for word in words:
            if word == "--":
                positional.extend(words)
                break
            if word in ("-i", "--ignore-case"):
                flags["ignore_case"] = True
            elif word in ("-l", "--files-with-matches"):
                flags["files_only"] = True
            elif word in ("-w", "--word-regexp"):
                flags["word"] = True
            elif word in ("-F", "--fixed-strings"):
                flags["fixed"] = True
            elif word in ("--max", "-m", "--max-count"):
                max_matches = _count(next(words, ""), word)
            elif word.startswith("--max="):
                max_matches = _count(word.split("=", 1)[1], "--max")
            elif word in _NO_OP_FLAGS:
                continue
            elif _OPTION.fullmatch(word):
                raise ToolError(f"unknown grep option {word}; usage: {_USAGE}")
            else:
                positional.append(word)
        if not positional:
            raise ToolError(f"grep needs a PATTERN; usage: {_USAGE}")
        if len(positional) > 2:
            raise ToolError(
                f"grep takes a PATTERN and one PATH, got {len(positional)} words "
                f"(quote a pattern with spaces); usage: {_USAGE}"
            )
        path = positional[1] if len(positional) == 2 else "."
        return cls(positional[0], path, max_matches=max_matches, **flags)

    def compile(self) -> re.Pattern[str]:
        source = re.escape(self.pattern) if self.fixed else self.pattern
        if self.word:
            source = rf"\b(?:{source})\b"
        flags = re.MULTILINE | (re.IGNORECASE if self.ignore_case else 0)
        try:
            return re.compile(source, flags)
        except re.error as exc:
            raise ToolError(f"invalid regex {self.pattern!r}: {exc}") from None


def _count(text: str, flag: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ToolError(f"{flag} needs a positive number, not {text!r}")
    return int(text)


class GrepTool:
    """Searches file contents with ripgrep (or a Python regex), respecting `.gitignore`."""

    name: ClassVar[str] = "grep"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "grep PATTERN [PATH] [-i] [-l] [--max N]: regex search, `path:line: text`, "
        "respecting .gitignore"
    )

    def __init__(
        self, *, max_matches: int = 200, max_file_bytes: int = 4_000_000, engine: str = "auto"
    ) -> None:
        self.max_matches = max_matches
        self.max_file_bytes = max_file_bytes
        """Only the Python engine skips files over this size (and names them); ripgrep has none."""
        self.engine = engine
        """"auto" (ripgrep when found), "rg" or "python"."""

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        query = GrepQuery.parse(action.args)
        start = ctx.guard.resolve(query.path)
        if not start.exists():
            from normalize.tools.view import missing_path  # the outline machinery: only here

            raise missing_path(ctx, query.path, start)
        found = self.search(query, start, ctx)
        return _report(query, found, query.max_matches or self.max_matches, ctx)

    def keep(self, query: GrepQuery) -> int:
        """How many matching lines of one file a search holds: what the report can show."""
        return query.max_matches or self.max_matches

    def search(self, query: GrepQuery, start: Path, ctx: ToolContext) -> Found:
        """Every match of `query` under `start`, on ripgrep when it can, else in Python."""
        rg = None if self.engine == "python" else find_rg(ctx.guard.root)
        note = ""
        if rg is None and self.engine == "rg":
            raise ToolError("grep: ripgrep (rg) is not installed; pip install ripgrep")
        if rg is not None:
            try:
                return search_rg(rg, query, start, ctx, self.keep(query))
            except RgUnsupported as exc:
                note = f"(ripgrep cannot run this pattern: {exc}; searched with Python's re)"
            except RgUnconfined as exc:  # reads that might follow a swapped link: Python's
                note = f"(ripgrep cannot be confined: {exc}; searched with Python's re)"
        elif self.engine == "auto":
            note = "(ripgrep not found; searched with Python's re, slower)"
        found = _search_python(query.compile(), start, ctx, self.max_file_bytes, self.keep(query))
        found.note = note
        return found


def _search_python(
    regex: re.Pattern[str], start: Path, ctx: ToolContext, max_bytes: int, keep: int
) -> Found:
    found = Found()
    for path in walk(ctx.guard.root, start):
        if ctx.cancel.cancelled:
            break
        try:
            if path.stat().st_size > max_bytes:
                found.skipped_large.append(ctx.guard.relative(path))
                continue
            raw = read_bytes(ctx.guard.root, path.relative_to(ctx.guard.root))
        except OSError:
            found.unreadable.append(ctx.guard.relative(path))  # said in the result, not hidden
            continue
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte-order mark is not text (ripgrep drops it too)
        text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
        if regex.search(text) is None:  # most files: one C-speed scan, no line loop
            continue
        nul = raw.find(b"\x00")
        if nul >= 0:  # binary from its first NUL, as ripgrep reads it: counted when a match
            if regex.search(raw[:nul].decode("utf-8", "replace")) is not None:  # came before
                found.skipped_binary += 1
            continue
        hits = FileHits(ctx.guard.relative(path))
        for number, line in enumerate(text.split("\n"), 1):
            if regex.search(line) is None:
                continue
            if len(hits.lines) >= keep:
                hits.unkept += 1
            elif len(line) > MAX_LINE_BYTES:
                found.cut_lines += 1
                hits.lines.append((number, line[:MAX_TEXT] + "\u2026"))
            else:
                hits.lines.append((number, line))
        if hits.lines:
            found.files.append(hits)
    return found


def _report(query: GrepQuery, found: Found, cap: int, ctx: ToolContext) -> ActionResult:
    out: list[str] = []
    matches = shown = hidden_files = 0
    for hits in found.files:
        count = hits.count
        matches += count
        if query.files_only:
            continue
        room = max(0, cap - shown)
        if room:
            for number, line in hits.first(room):
                out.append(f"{hits.rel}:{number}: {_clip(line)}")
        shown += min(room, count)
        if room < count:
            hidden_files += 1
    files = len(found.files)
    if query.files_only:
        out = [hits.rel for hits in found.files[:cap]]
    data: dict[str, object] = {
        "matches": matches,
        "files": files,
        "skipped_binary": found.skipped_binary,
        "skipped_large": len(found.skipped_large),
        "unreadable": len(found.unreadable),
        "engine": found.engine,
    }
    tail: list[str] = []
    if found.unreadable:
        many = len(found.unreadable)
        names = ", ".join(found.unreadable[:5]) + (" …" if many > 5 else "")
        tail.append(f"({many:,} file{'s' if many != 1 else ''} could not be read: {names})")
    if found.skipped_large:
        names = ", ".join(found.skipped_large[:5]) + (" …" if len(found.skipped_large) > 5 else "")
        tail.append(f"(not searched, over the size limit: {names})")
    if found.cut_lines:
        tail.append(f"({found.cut_lines:,} matching line(s) over "
                    f"{MAX_LINE_BYTES:,} bytes: only the start of each was read)")
    if found.note:
        tail.append(found.note)
    if not matches:
        data["exit_code"] = 1
        text = "\n".join([f"no matches for {query.pattern}", *tail])
        return ActionResult.success(text, data=data)
    if query.files_only and files > cap:
        out.append(f"… {files - cap:,} more files; --max {files} lists them all")
    elif not query.files_only and matches > shown:
        noun = "file" if hidden_files == 1 else "files"
        out.append(f"… {matches - shown:,} more matches in {hidden_files:,} {noun}; "
                   f"--max {matches} shows them all, -l lists the files")
    if ctx.cancel.cancelled:
        out.append("(search cancelled; results are partial)")
    return ActionResult.success("\n".join([*out, *tail]), data=data)


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_TEXT else line[: MAX_TEXT - 1] + "…"
