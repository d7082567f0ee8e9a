"""`skeleton`: the symbols of a file or of every supported file under a directory, paged.

A page holds `--limit` symbol rows starting at row `--offset` (counted over
the whole file or the whole directory, depth first); every cut ends with the
command that shows the next page. `data["items"]` holds the page's symbols
as records (kind, name, parent, start, end, signature, doc).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from normalize.errors import ToolError
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext
from normalize.tools.code import language_for, outline
from normalize.tools.code.symbols import Row, format_rows, record, rows
from normalize.tools.files import is_binary, walk
from normalize.tools.view import (
    READ_LIMIT,
    Target,
    find_or_fail,
    outline_or_fail,
    read_lines,
    resolve_target,
)

USAGE = "skeleton PATH | PATH/SYMBOL | DIR [--offset N] [--limit N]"
_NUMBER_FLAGS = ("--offset", "--limit")


def _parse(args: list[str]) -> tuple[str, int, int | None]:
    """(PATH, offset, limit) from `skeleton` words; a bad number is a one-line error."""
    positional: list[str] = []
    numbers: dict[str, int] = {}
    words = iter(args)
    for word in words:
        flag, eq, value = word.partition("=")
        if flag in _NUMBER_FLAGS:
            text = value if eq else next(words, "")
            if not text.isdigit() or (flag == "--limit" and int(text) < 1):
                raise ToolError(
                    f"skeleton {flag} needs a {'positive ' * (flag == '--limit')}"
                    f"number, not {text!r}; usage: {USAGE}"
                )
            numbers[flag] = int(text)
        elif re.fullmatch(r"--?[A-Za-z][\w-]*", word):
            raise ToolError(f"unknown skeleton option {word}; usage: {USAGE}")
        else:
            positional.append(word)
    if len(positional) > 1:
        raise ToolError(
            f"skeleton takes one path, got {len(positional)}: {' '.join(positional)}; "
            f"usage: {USAGE}"
        )
    path = positional[0] if positional else "."
    return path, numbers.get("--offset", 0), numbers.get("--limit")


class SkeletonTool:
    """Signatures of classes and functions with their line ranges, for a file or a directory."""

    name: ClassVar[str] = "skeleton"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "skeleton PATH [--offset N] [--limit N]: signatures of classes and functions with line "
        "numbers (a directory: each supported file), paged"
    )
    usage: ClassVar[str] = USAGE

    def __init__(self, *, max_symbols: int = 600, max_file_bytes: int = 2_000_000) -> None:
        self.max_symbols = max_symbols
        self.max_file_bytes = max_file_bytes

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        args = action.args or ([str(action.params["path"])] if action.params.get("path") else [])
        spec, offset, limit = _parse(args)
        limit = limit or self.max_symbols
        target = resolve_target(ctx, spec)
        if target.path.is_dir():
            return self._directory(ctx, target, offset, limit)
        if target.start is not None:
            raise ToolError(f"skeleton takes a file or a symbol, not a line range: {spec}")
        if target.path.stat().st_size > READ_LIMIT:
            raise ToolError(f"{target.shown} is too large to outline; use view PATH:START-END")
        symbols = outline_or_fail(target, "\n".join(read_lines(target.path, ctx.guard.root)))
        if target.symbol is not None:
            symbols = [find_or_fail(target, symbols, target.symbol)]
        every = rows(symbols)
        page = every[offset : offset + limit]
        data: dict[str, Any] = {
            "path": target.shown, "kind": "skeleton", "symbols": len(every), "offset": offset,
            "shown": len(page), "items": [record(row) for row in page],
        }  # fmt: skip
        if not every:
            return ActionResult.success(f"{target.shown}: no classes or functions", data=data)
        if not page:
            raise ToolError(
                f"{target.shown} has {len(every):,} symbols; --offset {offset} is past the end"
            )
        lines = format_rows(page)
        if offset:
            lines.insert(0, f"(symbols {offset + 1:,}-{offset + len(page):,} of {len(every):,})")
        if offset + len(page) < len(every):
            left = len(every) - offset - len(page)
            lines.append(
                f"… {left:,} more symbols; next page: skeleton {_spec(target)} "
                f"--offset {offset + len(page)}"
            )
        return ActionResult.success("\n".join(lines), data=data)

    def _directory(self, ctx: ToolContext, target: Target, offset: int, limit: int) -> ActionResult:
        parts: list[str] = []
        items: list[dict[str, object]] = []
        seen = files = files_after = 0
        skipped: list[str] = []
        full = False
        for path in walk(ctx.guard.root, target.path):
            if ctx.cancel.cancelled:
                break
            if language_for(path) is None:
                continue
            if full:
                files_after += 1
                continue
            rel = ctx.guard.relative(path)
            if path.stat().st_size > self.max_file_bytes or is_binary(path):
                skipped.append(rel)
                continue
            found = rows(outline(path, "\n".join(read_lines(path, ctx.guard.root))) or [])
            page = _slice(found, seen, offset, limit - len(items))
            seen += len(found)
            if page:
                files += 1
                parts.append(rel)
                parts.extend(format_rows(page, indent="  "))
                items.extend(record(row, rel) for row in page)
            if len(items) >= limit:
                full = True
                files_after += seen > offset + len(items)  # this file's rest
        data: dict[str, Any] = {
            "path": target.shown, "kind": "skeleton", "files": files, "offset": offset,
            "shown": len(items), "more_files": files_after, "skipped_large": skipped,
            "items": items,
        }  # fmt: skip
        if not parts and not seen:
            return ActionResult.success(f"{target.shown}/: no supported source files", data=data)
        if offset:
            parts.insert(0, f"(symbols {offset + 1:,}-{offset + len(items):,})")
        if full and files_after:
            parts.append(
                f"… more symbols in {files_after:,} more files; next page: skeleton "
                f"{target.shown} --offset {offset + len(items)}"
            )
        if skipped:
            parts.append(
                f"(not outlined, over {self.max_file_bytes:,} bytes or binary: "
                f"{', '.join(skipped[:10])}{' …' if len(skipped) > 10 else ''})"
            )
        if not items:
            parts.append(f"(--offset {offset} is past the last symbol, {seen:,})")
        return ActionResult.success("\n".join(parts), data=data)


def _slice(found: list[Row], seen: int, offset: int, room: int) -> list[Row]:
    """The part of one file's rows on the page, given `seen` rows before the file."""
    start = max(0, offset - seen)
    return found[start : start + max(room, 0)]


def _spec(target: Target) -> str:
    return target.shown if target.symbol is None else f"{target.shown}/{target.symbol}"
