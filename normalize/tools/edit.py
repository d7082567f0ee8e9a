"""The `edit` and `write` tools: change files in place and answer with a unified diff.

`edit` has three forms (see `normalize help commands`): SEARCH/REPLACE blocks, a line range
(`PATH:START-END`) and a symbol (`PATH/Class/method`). Every form is applied in
memory first and written once, atomically, so a failing block leaves the file
untouched. Files keep their encoding (UTF-8 with or without BOM; latin-1 for
bytes that are not UTF-8), their newline style and their trailing-newline state;
bodies arrive with LF newlines.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from normalize.errors import ToolError
from normalize.fsopen import read_bytes, write_bytes
from normalize.task import Action, ActionResult

if TYPE_CHECKING:
    from normalize.tools.base import ToolContext
    from normalize.tools.code import Symbol
    from normalize.tools.guard import WorkspaceGuard

__all__ = [
    "Block",
    "EditTool",
    "FileText",
    "WriteTool",
    "apply_blocks",
    "parse_blocks",
    "unified_diff",
]

EDIT_USAGE = (
    "usage: `edit PATH <<EOF` with SEARCH/REPLACE blocks, `edit PATH:START-END <<EOF` "
    "or `edit PATH/SYMBOL <<EOF`"
)
WRITE_USAGE = "usage: `write PATH <<EOF` followed by the file's content and a line `EOF`"

BOM = b"\xef\xbb\xbf"
BINARY_SNIFF = 8192
_SEARCH_RE = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
_DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_RE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")
_RANGE_RE = re.compile(r"^(?P<path>.+):(?P<start>\d+)(?:-(?P<end>\d+))?$")
_INDENT_RE = re.compile(r"^[ \t]*")


# -- text files ------------------------------------------------------------------------------


@dataclass
class FileText:
    """A text file decoded for editing, with what it takes to write it back the same way."""

    text: str
    encoding: str = "utf-8"
    bom: bool = False
    newline: str = "\n"

    @classmethod
    def decode(cls, raw: bytes, shown: str) -> FileText:
        """Decode file bytes; newlines become LF when the file is mostly CRLF."""
        if b"\x00" in raw[:BINARY_SNIFF]:
            raise ToolError(f"{shown} looks binary; edit changes text files only")
        bom = raw.startswith(BOM)
        if bom:
            raw = raw[len(BOM) :]
        try:
            text, encoding = raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = raw.decode("latin-1"), "latin-1"
        crlf = raw.count(b"\r\n")
        newline = "\r\n" if crlf and crlf >= raw.count(b"\n") - crlf else "\n"
        if newline == "\r\n":
            text = text.replace("\r\n", "\n")
        return cls(text, encoding, bom, newline)

    def encode(self, text: str, shown: str) -> bytes:
        """The bytes for `text` (LF newlines) in this file's encoding and newline style."""
        if self.newline != "\n":
            text = text.replace("\n", self.newline)
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise ToolError(
                f"{shown} is {self.encoding}-encoded and cannot hold {bad!r}; "
                f"write the character another way"
            ) from None
        return BOM + data if self.bom else data


def _split(text: str) -> tuple[list[str], bool]:
    """Lines without newlines, and whether the text ends with one."""
    if not text:
        return [], False
    if text.endswith("\n"):
        return text[:-1].split("\n"), True
    return text.split("\n"), False


def _join(lines: list[str], trailing: bool) -> str:
    return "\n".join(lines) + ("\n" if trailing and lines else "")


def _body_lines(body: str) -> list[str]:
    """The lines of a body; one final newline is the body's end, not an empty line."""
    if body.endswith("\n"):
        body = body[:-1]
    return body.split("\n") if body else []


# -- diffs -----------------------------------------------------------------------------------


def _keepends(text: str) -> list[str]:
    lines, trailing = _split(text)
    out = [line + "\n" for line in lines]
    if out and not trailing:
        out[-1] = out[-1][:-1]
    return out


def unified_diff(old: str, new: str, rel: str, *, created: bool = False) -> tuple[str, int, int]:
    """A unified diff (3 lines of context) and the counts of added and removed lines."""
    fromfile = "/dev/null" if created else f"a/{rel}"
    out: list[str] = []
    added = removed = 0
    lines = difflib.unified_diff(_keepends(old), _keepends(new), fromfile, f"b/{rel}", n=3)
    for index, line in enumerate(lines):
        if index >= 2:
            added += line.startswith("+")
            removed += line.startswith("-")
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out), added, removed


# -- SEARCH/REPLACE blocks -------------------------------------------------------------------


@dataclass
class Block:
    """One SEARCH/REPLACE block; texts hold LF newlines and no final newline."""

    search: str
    replace: str
    index: int
    line: int


def parse_blocks(body: str) -> list[Block]:
    """The SEARCH/REPLACE blocks of an edit body; text outside blocks is ignored."""
    blocks: list[Block] = []
    state = "outside"
    search: list[str] = []
    replace: list[str] = []
    start = 0
    for number, line in enumerate(body.split("\n"), 1):
        if state == "outside":
            if _SEARCH_RE.match(line):
                state, search, replace, start = "search", [], [], number
        elif state == "search":
            if _DIVIDER_RE.match(line):
                state = "replace"
            elif _SEARCH_RE.match(line) or _REPLACE_RE.match(line):
                raise ToolError(
                    f"block {len(blocks) + 1} (body line {start}) has no `=======` line "
                    f"between SEARCH and REPLACE"
                )
            else:
                search.append(line)
        elif _REPLACE_RE.match(line):
            blocks.append(Block("\n".join(search), "\n".join(replace), len(blocks) + 1, start))
            state = "outside"
        else:
            replace.append(line)
    if state != "outside":
        raise ToolError(
            f"block {len(blocks) + 1} (body line {start}) is not closed by `>>>>>>> REPLACE`"
        )
    return blocks


def _find_all(text: str, needle: str) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _reindent(lines: list[str], have: str, want: str) -> list[str]:
    """Shift `lines` from indentation `have` to `want` when one is a prefix of the other."""
    if have == want:
        return lines
    if want.startswith(have):
        extra = want[len(have) :]
        return [extra + line if line.strip() else line for line in lines]
    if have.startswith(want):
        cut = have[len(want) :]
        return [line[len(cut) :] if line.startswith(cut) else line for line in lines]
    return lines


def _indent(line: str) -> str:
    match = _INDENT_RE.match(line)
    return match.group(0) if match else ""


def _relaxed_matches(lines: list[str], wanted: list[str]) -> list[int]:
    """0-based starts of the windows equal to `wanted` when each line is stripped."""
    stripped = [line.strip() for line in lines]
    target = [line.strip() for line in wanted]
    size = len(target)
    return [
        i
        for i in range(len(stripped) - size + 1)
        if stripped[i] == target[0] and stripped[i : i + size] == target
    ]


def _closest(lines: list[str], wanted: list[str]) -> tuple[int, int, float]:
    """The 0-based window of `lines` most like `wanted`: (start, size, similarity)."""
    size = min(len(wanted), len(lines))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(wanted))
    best, best_at = -1.0, 0
    for start in range(len(lines) - size + 1):
        matcher.set_seq1("\n".join(lines[start : start + size]))
        if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
            ratio = matcher.ratio()
            if ratio > best:
                best, best_at = ratio, start
    return best_at, size, max(best, 0.0)


def _quote(lines: list[str], start: int, size: int) -> str:
    width = len(str(start + size))
    return "\n".join(
        f"  {start + i + 1:>{width}} | {line}" for i, line in enumerate(lines[start : start + size])
    )


def _apply_block(text: str, block: Block, total: int, rel: str) -> tuple[str, str | None]:
    """`text` with one block applied, and a note when it needed the whitespace kindness."""
    name = f"SEARCH block {block.index}" + (f" of {total}" if total > 1 else "")
    unchanged = f"No block was applied; {rel} is unchanged."
    if not block.search.strip():
        if not text.strip():
            return (block.replace + "\n" if block.replace else ""), None
        raise ToolError(
            f"{name} is empty; quote the lines to change, or use `edit {rel}:START-END`. "
            f"{unchanged}"
        )
    found = _find_all(text, block.search)
    if len(found) == 1:
        at = found[0]
        return text[:at] + block.replace + text[at + len(block.search) :], None
    if found:
        where = ", ".join(str(_line_of(text, at)) for at in found)
        raise ToolError(
            f"{name} matches {rel} {len(found)} times (lines {where}); include more "
            f"surrounding lines so it matches exactly once. {unchanged}"
        )
    lines, trailing = _split(text)
    wanted = block.search.split("\n")
    relaxed = _relaxed_matches(lines, wanted) if lines else []
    if len(relaxed) == 1:
        start = relaxed[0]
        first = next((j for j, w in enumerate(wanted) if w.strip()), 0)
        replacement = _reindent(
            block.replace.split("\n") if block.replace else [],
            _indent(wanted[first]),
            _indent(lines[start + first]),
        )
        lines[start : start + len(wanted)] = replacement
        end = start + len(wanted)
        note = (
            f"note: {name} matched lines {start + 1}-{end} only when leading/trailing "
            f"whitespace is ignored; applied with the file's indentation"
        )
        return _join(lines, trailing), note
    if relaxed:
        where = ", ".join(str(i + 1) for i in relaxed)
        raise ToolError(
            f"{name} does not match {rel} exactly, and matches {len(relaxed)} places when "
            f"whitespace is ignored (lines {where}); copy the exact lines with more "
            f"context. {unchanged}"
        )
    if not lines:
        raise ToolError(f"{name} does not match: {rel} is empty. {unchanged}")
    start, size, ratio = _closest(lines, wanted)
    raise ToolError(
        f"{name} does not match {rel}. The closest lines ({start + 1}-{start + size}, "
        f"{ratio:.0%} similar):\n{_quote(lines, start, size)}\n"
        f"Copy the lines exactly into SEARCH, or replace them with "
        f"`edit {rel}:{start + 1}-{start + size}`. {unchanged}"
    )


def apply_blocks(text: str, blocks: list[Block], rel: str) -> tuple[str, list[str]]:
    """Apply every block in order in memory; raises `ToolError` on the first that fails."""
    notes: list[str] = []
    for block in blocks:
        text, note = _apply_block(text, block, len(blocks), rel)
        if note:
            notes.append(note)
    return text, notes


# -- targets ---------------------------------------------------------------------------------


@dataclass
class _Target:
    path: Path
    rel: str
    start: int | None = None
    end: int | None = None
    symbol: str | None = None


def _resolve_target(arg: str, guard: WorkspaceGuard) -> _Target:
    """Split `PATH`, `PATH:START-END` and `PATH/SYMBOL`; an existing file name always wins."""
    real = guard.resolve(arg, write=True)
    if real.exists():
        return _Target(real, guard.relative(real))
    match = _RANGE_RE.match(arg)
    if match:
        real = guard.resolve(match["path"], write=True)
        start = int(match["start"])
        end = int(match["end"]) if match["end"] else start
        return _Target(real, guard.relative(real), start=start, end=end)
    parts = arg.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:cut])
        candidate = guard.resolve(prefix)
        if candidate.is_file():
            real = guard.resolve(prefix, write=True)
            return _Target(real, guard.relative(real), symbol="/".join(parts[cut:]))
    return _Target(real, guard.relative(real))


def _path_arg(action: Action, usage: str) -> str:
    args = action.args
    if len(args) != 1:
        got = "no PATH" if not args else f"{len(args)} words (quote a path with spaces)"
        raise ToolError(f"{action.tool or 'edit'} takes one PATH, got {got}; {usage}")
    return args[0]


def _symbol_names(symbols: list[Symbol], prefix: str = "") -> Iterator[str]:
    for symbol in symbols:
        name = f"{prefix}{symbol.name}"
        yield name
        yield from _symbol_names(list(symbol.children), name + "/")


def _replace_symbol(text: str, target: _Target, body: str) -> tuple[str, list[str]]:
    from normalize.tools.code import address, find_symbols, outline

    assert target.symbol is not None
    symbols = outline(target.path, text)
    if symbols is None:
        raise ToolError(
            f"cannot find symbols in {target.rel} (language not supported); use "
            f"`edit {target.rel}:START-END` or SEARCH/REPLACE blocks"
        )
    found = find_symbols(symbols, target.symbol)
    if len(found) > 1:
        base = target.symbol.rsplit("/", 1)[0] + "/" if "/" in target.symbol else ""
        listed = ", ".join(
            f"{target.rel}/{base}{address(s)} ({s.kind}, lines {s.first_line}-{s.end_line})"
            for s in sorted(found, key=lambda s: s.line)
        )
        raise ToolError(
            f"{target.symbol!r} names {len(found)} definitions in {target.rel}; pick one: {listed}"
        )
    symbol = found[0] if found else None
    if symbol is None:
        names = list(_symbol_names(symbols))
        close = difflib.get_close_matches(target.symbol, names, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"it has: {', '.join(names[:15])}"
        raise ToolError(f"no symbol {target.symbol!r} in {target.rel}; {hint}")
    lines, trailing = _split(text)
    notes: list[str] = []
    new = _body_lines(body)
    first_line = symbol.first_line  # the doc comment above goes too, as `view` shows it
    have = _indent(lines[first_line - 1]) if first_line <= len(lines) else ""
    first = next((line for line in new if line.strip()), "")
    if have and first and not _indent(first):
        new = _reindent(new, "", have)
        notes.append(f"note: indented the body to match {target.symbol}")
    lines[first_line - 1 : symbol.end_line] = new
    return _join(lines, trailing), notes


def _replace_range(text: str, target: _Target, body: str) -> str:
    assert target.start is not None and target.end is not None
    lines, trailing = _split(text)
    start, end = target.start, target.end
    if start < 1 or end < start:
        raise ToolError(f"bad line range {start}-{end}: lines count from 1 and END >= START")
    if end > len(lines):
        raise ToolError(
            f"{target.rel} has {len(lines)} lines; the range {start}-{end} goes past the end"
        )
    lines[start - 1 : end] = _body_lines(body)
    return _join(lines, trailing)


def _read(root: Path, path: Path, rel: str) -> FileText:
    if path.is_dir():
        raise ToolError(f"{rel} is a directory")
    return FileText.decode(read_bytes(root, path.relative_to(root)), rel)


@dataclass
class _Change:
    """What an `edit` or `write` would do: the file's old text and its new one."""

    root: Path
    path: Path
    rel: str
    file: FileText
    new: str
    notes: list[str]
    created: bool = False

    def diff(self) -> tuple[str, int, int]:
        return unified_diff(self.file.text, self.new, self.rel, created=self.created)

    def preview(self) -> str:
        """The diff, shown to a person before they approve the change."""
        if not self.created and self.new == self.file.text:
            return f"no changes: {self.rel} already has this text"
        return "\n".join([*self.notes, self.diff()[0]]).rstrip("\n")

    def save(self) -> ActionResult:
        """Write the new text atomically and answer with its diff against the old."""
        diff, added, removed = self.diff()
        data: dict[str, object] = {"path": self.rel, "added": added, "removed": removed}
        if not self.created and self.new == self.file.text:
            return ActionResult.success(
                "\n".join([*self.notes, f"no changes: {self.rel} already has this text"]),
                data=data)
        write_bytes(self.root, self.path.relative_to(self.root), self.file.encode(self.new,
                                                                                  self.rel))
        return ActionResult.success("\n".join([*self.notes, diff]).rstrip("\n"), data=data)


# -- the tools -------------------------------------------------------------------------------


class EditTool:
    """Replace SEARCH texts, a line range or a symbol's source; answer with a diff."""

    name: ClassVar[str] = "edit"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "edit PATH (SEARCH/REPLACE) · PATH:START-END · PATH/SYMBOL <<EOF"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        return self.change(action, ctx).save()

    def preview(self, action: Action, ctx: ToolContext) -> str:
        """The diff this edit would make, nothing written."""
        return self.change(action, ctx).preview()

    def change(self, action: Action, ctx: ToolContext) -> _Change:
        """The edit worked out in memory: `ToolError` when it cannot be made."""
        arg = _path_arg(action, EDIT_USAGE)
        body = action.body
        if body is None:
            raise ToolError(f"edit {arg} needs a body; {EDIT_USAGE}")
        body = body.replace("\r\n", "\n")
        target = _resolve_target(arg, ctx.guard)
        if not target.path.exists():
            raise ToolError(f"no such file: {target.rel}; create it with `write {target.rel}`")
        file = _read(ctx.guard.root, target.path, target.rel)
        old = file.text
        has_blocks = any(_SEARCH_RE.match(line) for line in body.split("\n"))
        notes: list[str] = []
        if target.symbol is not None or target.start is not None:
            if has_blocks:
                raise ToolError(
                    f"SEARCH/REPLACE blocks go with `edit {target.rel}`; with a line range or "
                    f"a symbol the body is the new text itself"
                )
            if target.symbol is not None:
                new, notes = _replace_symbol(old, target, body)
            else:
                new = _replace_range(old, target, body)
        else:
            if not has_blocks:
                raise ToolError(
                    f"edit {target.rel} needs SEARCH/REPLACE blocks (`<<<<<<< SEARCH`, "
                    f"`=======`, `>>>>>>> REPLACE`); to replace the whole file use "
                    f"`write {target.rel}`"
                )
            new, notes = apply_blocks(old, parse_blocks(body), target.rel)
        return _Change(ctx.guard.root, target.path, target.rel, file, new, notes)


class WriteTool:
    """Create or overwrite a file (parent directories included); answer with a diff."""

    name: ClassVar[str] = "write"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "write PATH <<EOF: create or overwrite a file"

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        change = self.change(action, ctx)
        result = change.save()
        result.data["created"] = change.created
        if result.data["added"] or result.data["removed"] or change.created:
            verb = "created" if change.created else "overwrote"
            head = f"{verb} {change.rel} (+{result.data['added']} -{result.data['removed']})"
            result.output = f"{head}\n{result.output}"
        return result

    def preview(self, action: Action, ctx: ToolContext) -> str:
        """The diff this write would make, nothing written."""
        return self.change(action, ctx).preview()

    def change(self, action: Action, ctx: ToolContext) -> _Change:
        """The new file text worked out in memory."""
        arg = _path_arg(action, WRITE_USAGE)
        body = action.body
        if body is None:
            raise ToolError(f"write {arg} needs a body; {WRITE_USAGE}")
        real = ctx.guard.resolve(arg, write=True)
        rel = ctx.guard.relative(real)
        created = not real.exists()
        notes: list[str] = []
        try:
            file = FileText("") if created else _read(ctx.guard.root, real, rel)
        except ToolError:
            if real.is_dir():
                raise
            file = FileText("")
            notes.append(f"note: {rel} held binary data; the diff is against an empty file")
        new = body.replace("\r\n", "\n")
        if new and not new.endswith("\n") and (created or not file.text or file.text[-1] == "\n"):
            new += "\n"
        if file.encoding != "utf-8":
            try:
                new.encode(file.encoding)
            except UnicodeEncodeError:
                file.encoding = "utf-8"
                notes.append(f"note: {rel} was latin-1 and is now written as UTF-8")
        return _Change(ctx.guard.root, real, rel, file, new, notes, created=created)
