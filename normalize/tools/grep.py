"""`grep`: a regex search over the workspace, the way git sees it.

Output is one match a line, `path:line: text`, paths relative to the
workspace; `.gitignore`d files, binaries and files over a size limit are
skipped. Past the cap, a last line counts the matches left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from normalize.errors import ToolError
from normalize.fsopen import read_bytes
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext
from normalize.tools.files import BINARY_SNIFF, walk
from normalize.tools.view import missing_path

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
    """Searches file contents with a Python regex, respecting `.gitignore`."""

    name: ClassVar[str] = "grep"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "grep PATTERN [PATH] [-i] [-l] [--max N]: regex search, `path:line: text`, "
        "respecting .gitignore"
    )

    def __init__(self, *, max_matches: int = 200, max_file_bytes: int = 4_000_000) -> None:
        self.max_matches = max_matches
        self.max_file_bytes = max_file_bytes

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        query = GrepQuery.parse(action.args)
        regex = query.compile()
        start = ctx.guard.resolve(query.path)
        if not start.exists():
            raise missing_path(ctx, query.path, start)
        cap = query.max_matches or self.max_matches
        out: list[str] = []
        matches = files = shown = hidden_files = 0
        skipped_binary = skipped_large = 0
        for path in walk(ctx.guard.root, start):
            if ctx.cancel.cancelled:
                break
            try:
                if path.stat().st_size > self.max_file_bytes:
                    skipped_large += 1
                    continue
                raw = read_bytes(ctx.guard.root, path.relative_to(ctx.guard.root))
            except OSError:
                continue
            if b"\x00" in raw[:BINARY_SNIFF]:
                skipped_binary += 1
                continue
            text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
            if regex.search(text) is None:  # most files: one C-speed scan, no line loop
                continue
            rel = ctx.guard.relative(path)
            found = shown_here = 0
            for number, line in enumerate(text.split("\n"), 1):
                if regex.search(line) is None:
                    continue
                found += 1
                if not query.files_only and shown < cap:
                    out.append(f"{rel}:{number}: {_clip(line)}")
                    shown += 1
                    shown_here += 1
            if not found:
                continue
            matches += found
            files += 1
            if query.files_only and files <= cap:
                out.append(rel)
            elif not query.files_only and shown_here < found:
                hidden_files += 1
        data = {
            "matches": matches,
            "files": files,
            "skipped_binary": skipped_binary,
            "skipped_large": skipped_large,
        }
        if not matches:
            data["exit_code"] = 1
            return ActionResult.success(f"no matches for {query.pattern}", data=data)
        if query.files_only and files > cap:
            out.append(f"… {files - cap:,} more files")
        elif not query.files_only and matches > shown:
            noun = "file" if hidden_files == 1 else "files"
            out.append(f"… {matches - shown:,} more matches in {hidden_files:,} {noun}")
        if ctx.cancel.cancelled:
            out.append("(search cancelled; results are partial)")
        return ActionResult.success("\n".join(out), data=data)


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_TEXT else line[: MAX_TEXT - 1] + "…"
