"""`view` and `skeleton`: files, line ranges, symbols and directory trees.

Every line of a file is shown as `{number}│ {text}`, the number right-aligned
to the width of the largest number shown (at least 4), e.g. `  12│ x = 1`; an
empty line is just `  13│`. A skeleton shows one symbol a line as
`{start}-{end}  {signature}` (see `outline_text`), which is never mistaken for
file content.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar

from normalize.errors import ToolError
from normalize.fsopen import open_file, read_bytes
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext, asked_bound
from normalize.tools.code import (
    Symbol,
    address,
    find_symbols,
    outline,
    outline_text,
    supported_languages,
)
from normalize.tools.files import is_binary, walk

GUTTER = "│"
MAX_LINE_CHARS = 2000
"""A shown line longer than this is cut (minified code would swamp the reader)."""
READ_LIMIT = 16_000_000
"""Files larger than this are never read whole: ranges are streamed, outlines refused."""
MAX_SYMBOL_LIST = 30
UNSAVED = ("(the editor's unsaved buffer of {path}, which differs from the file on disk: "
           "edits, programs and checkpoints use the file on disk)")
"""Said after a view of an editor's buffer (`ViewTool.buffers`)."""
MAX_WALK = 50_000
SUGGEST_WALK = 20_000

_RANGE = re.compile(r"(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d*))?")


@dataclass
class Target:
    """What a `view`/`skeleton` argument names: a path, maybe a line range or a symbol."""

    path: Path
    shown: str
    start: int | None = None
    end: int | None = None
    single: bool = False
    symbol: str | None = None
    root: Path | None = None  # the workspace: reads open beneath it (normalize.fsopen)


def resolve_target(ctx: ToolContext, spec: str) -> Target:
    """Parse `PATH`, `PATH:START-END`, `PATH:N` or `PATH/SYMBOL`; every path goes through the guard.

    `PATH/SYMBOL` splits at the longest prefix that is an existing file, so a
    real file path always wins over a symbol reading.
    """
    spec = spec.strip()
    match = _RANGE.fullmatch(spec)
    if match and not ctx.guard.resolve(spec).exists():
        path = ctx.guard.resolve(match["path"])
        if path.is_dir():
            raise ToolError(f"{match['path']} is a directory; a line range needs a file")
        if not path.is_file():
            if path.exists():
                raise ToolError(f"{match['path']}: {special_kind(path)}, not a regular file; "
                                "not read")
            raise missing_path(ctx, match["path"], path)
        start, end = int(match["start"]), match["end"]
        return Target(
            path,
            ctx.guard.relative(path),
            start=start,
            end=None if end is None or end == "" else int(end),
            single=end is None,
        )
    path = ctx.guard.resolve(spec)
    if path.exists():
        if not (path.is_dir() or path.is_file()):
            raise ToolError(f"{spec}: {special_kind(path)}, not a regular file; not read")
        return Target(path, ctx.guard.relative(path))
    parts = spec.rstrip("/").split("/")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ctx.guard.resolve("/".join(parts[:cut]))
        if prefix.is_file():
            return Target(prefix, ctx.guard.relative(prefix), symbol="/".join(parts[cut:]))
        if prefix.exists():
            break
    raise missing_path(ctx, spec, path)


def special_kind(path: Path) -> str:
    """What a path that is neither a file nor a directory is ("a FIFO", "a socket", …)."""
    import stat

    mode = path.stat().st_mode
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "a special file"


def missing_path(ctx: ToolContext, spec: str, path: Path) -> ToolError:
    """A one-line "no such file" error, suggesting close names when there are some."""
    parent = path.parent
    while not parent.exists() and parent != ctx.guard.root and ctx.guard.root in parent.parents:
        parent = parent.parent
    suggestions: list[str] = []
    if parent.is_dir():
        names = sorted(entry.name for entry in parent.iterdir())
        close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
        suggestions = [ctx.guard.relative(parent / name) for name in close]
    if not suggestions and path.name:
        found = (p for p in islice(walk(ctx.guard.root), SUGGEST_WALK) if p.name == path.name)
        suggestions = [ctx.guard.relative(p) for p in islice(found, 3)]
    hint = f" (did you mean {' or '.join(suggestions)}?)" if suggestions else ""
    return ToolError(f"no such file or directory: {spec}{hint}")


def numbered(lines: Iterable[str], first: int, last: int) -> str:
    """Lines with their numbers, `  12│ text`, numbered from `first`."""
    width = max(4, len(str(last)))
    out = []
    for number, line in enumerate(lines, first):
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… ({len(line) - MAX_LINE_CHARS:,} more characters)"
        out.append(f"{number:>{width}}{GUTTER} {line}" if line else f"{number:>{width}}{GUTTER}")
    return "\n".join(out)


def read_lines(path: Path, root: Path | None = None) -> list[str]:
    """The file's lines, decoded as UTF-8 with replacement, without line endings.

    With `root`, the file is opened beneath it without following links.
    """
    raw = read_bytes(root, path.relative_to(root)) if root is not None else path.read_bytes()
    text = raw.decode("utf-8", "replace")
    return split_lines(text)


def split_lines(text: str) -> list[str]:
    """Split at `\\n` only (as parsers count lines), dropping `\\r` and a final empty line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _stream_lines(path: Path, start: int, end: int | None, root: Path | None
                  ) -> Iterator[str]:
    with (path.open("rb") if root is None else open_file(root, path.relative_to(root))) as fh:
        for raw in islice(fh, start - 1, end):
            yield raw.decode("utf-8", "replace").rstrip("\r\n")


def _one_arg(action: Action, verb: str, usage: str) -> str | None:
    args = action.args
    if not args:
        path = action.params.get("path")
        return None if path is None else str(path)
    if len(args) == 2 and re.fullmatch(r"\d+(-\d*)?", args[1]):
        return f"{args[0]}:{args[1]}"  # `view a.py 10-20` reads as `view a.py:10-20`
    if len(args) > 1:
        raise ToolError(f"{verb} takes one path, got {len(args)}: {' '.join(args)}; usage: {usage}")
    return args[0]


def _symbol_names(symbols: list[Symbol]) -> str:
    names = [s.name for s in symbols[:MAX_SYMBOL_LIST]]
    more = len(symbols) - len(names)
    return ", ".join(names) + (f", … and {more} more" if more > 0 else "")


def outline_or_fail(target: Target, text: str) -> list[Symbol]:
    symbols = outline(target.path, text)
    if symbols is None:
        raise ToolError(
            f"cannot outline {target.shown}: not a supported language "
            f"({', '.join(supported_languages())})"
        )
    return symbols


def find_or_fail(target: Target, symbols: list[Symbol], spec: str) -> Symbol:
    return _candidates_or_fail(target, symbols, spec)[0]


def _candidates_or_fail(target: Target, symbols: list[Symbol], spec: str) -> list[Symbol]:
    found = find_symbols(symbols, spec)
    if not found:
        available = _symbol_names(symbols) or "none"
        raise ToolError(f"no symbol {spec!r} in {target.shown}; top-level symbols: {available}")
    return found


def others_note(shown: str, spec: str, chosen: Symbol, others: list[Symbol]) -> str:
    """One line naming the other definitions `spec` matches and how to view each."""
    base = spec.rsplit("@", 1)[0]
    prefix = base.rsplit("/", 1)[0] + "/" if "/" in base else ""
    listed = "; ".join(
        f"{s.first_line}-{s.end_line} {s.kind} (view {shown}/{prefix}{address(s)})" for s in others
    )
    count = len(others) + 1
    return (
        f"note: {base} has {count} definitions; showing {chosen.first_line}-{chosen.end_line} "
        f"({chosen.kind}); the others: {listed}"
    )


class ViewTool:
    """Shows a file with line numbers, a line range, a symbol's source, or a directory tree."""

    name: ClassVar[str] = "view"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "view PATH | PATH:START-END | PATH/SYMBOL | DIR: a file with line numbers "
        "(big files give their outline), a symbol's source, or a directory tree"
    )
    usage: ClassVar[str] = "view PATH | PATH:START-END | PATH:N | PATH/SYMBOL | DIR"
    asked: ClassVar[bool] = True
    """The reader asked for this text: it comes back whole up to the asked-for bound."""

    def __init__(
        self,
        *,
        max_lines: int = 600,
        max_bytes: int = 60_000,
        max_entries: int = 200,
        max_outline: int = 400,
        context: int = 10,
        buffers: Callable[[Path], str | None] | None = None,
    ) -> None:
        self.buffers = buffers
        """The text an editor holds for a file, saved or not (`normalize acp`, when the client
        reads files); None, or no answer: the disk."""
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.max_outline = max_outline
        self.context = context

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        spec = _one_arg(action, "view", self.usage)
        target = resolve_target(ctx, spec or ".")
        target.root = ctx.guard.root
        if target.path.is_dir():
            return directory_tree(ctx, target, self.max_entries)
        if is_binary(target.path):
            size = target.path.stat().st_size
            return ActionResult.success(
                f"{target.shown}: binary file ({size:,} bytes); not shown",
                data={"path": target.shown, "kind": "binary", "bytes": size},
            )
        if target.path.stat().st_size > READ_LIMIT:
            if target.start is not None:
                return self._range(target)
            return self._head(target, None, "too large to outline")
        buffer = self._buffer(target)
        if buffer is not None:  # the editor's, unsaved: shown, and said so
            result = self._text(target, split_lines(buffer), action, ctx,
                                size=len(buffer.encode()))
            result.output += "\n" + UNSAVED.format(path=target.shown)
            result.data = {**(result.data or {}), "buffer": True}
            return result
        return self._text(target, read_lines(target.path, ctx.guard.root), action, ctx,
                          size=target.path.stat().st_size)

    def _buffer(self, target: Target) -> str | None:
        """The editor's text of the file when it differs from the disk's (None: the same)."""
        if self.buffers is None:
            return None
        text = self.buffers(target.path)
        if text is None:
            return None
        disk = read_bytes(target.root, target.path.relative_to(target.root)) \
            if target.root is not None else target.path.read_bytes()
        return None if text == disk.decode("utf-8", "replace") else text

    def _text(self, target: Target, lines: list[str], action: Action, ctx: ToolContext, *,
              size: int) -> ActionResult:
        """The file's `lines` (from the disk or an editor's buffer), as the target asks."""
        if target.start is not None:
            return self._range(target, lines)
        if target.symbol is not None:
            return self._symbol(target, lines)
        bound_lines, bound_chars = asked_bound(ctx.cache_for(action))
        if len(lines) > min(self.max_lines, bound_lines) or size > self.max_bytes:
            return self._big(target, lines)
        data = {"path": target.shown, "kind": "file", "lines": len(lines)}
        if not lines:
            return ActionResult.success(f"{target.shown}: empty file", data=data)
        text = numbered(lines, 1, len(lines))
        if len(text) > bound_chars:  # past what comes back whole: the outline says more
            return self._big(target, lines)
        return ActionResult.success(text, data=data)

    def _range(self, target: Target, lines: list[str] | None = None) -> ActionResult:
        """A line range: of `lines`, or streamed from a file too large to read whole."""
        start, end = target.start or 1, target.end
        if target.single:
            start, end = max(1, start - self.context), start + self.context
        if start < 1 or (end is not None and end < start):
            raise ToolError(f"bad line range {start}-{end} for {target.shown}; lines start at 1")
        if lines is None:
            shown = list(_stream_lines(target.path, start, end, target.root))
            total = None
        else:
            total = len(lines)
            shown = lines[start - 1 : end]
        if not shown:
            size = f" ({target.shown} has {total:,} lines)" if total is not None else ""
            raise ToolError(f"line {start} is past the end of {target.shown}{size}")
        last = start + len(shown) - 1
        output = numbered(shown, start, last)
        if total is not None and end is not None and end > total and not target.single:
            output += f"\n(end of file: {target.shown} has {total:,} lines)"
        data = {"path": target.shown, "kind": "range", "start": start, "end": last, "lines": total}
        return ActionResult.success(output, data=data)

    def _symbol(self, target: Target, lines: list[str]) -> ActionResult:
        spec = target.symbol or ""
        found = _candidates_or_fail(target, outline_or_fail(target, "\n".join(lines)), spec)
        symbol, others = found[0], found[1:]
        first = symbol.first_line
        span = lines[first - 1 : symbol.end_line]
        data: dict[str, Any] = {
            "path": target.shown,
            "kind": "symbol",
            "symbol": spec,
            "start": first,
            "end": symbol.end_line,
        }
        note = ""
        if others:
            note = others_note(target.shown, spec, symbol, others) + "\n"
            data["others"] = [
                {"start": s.first_line, "end": s.end_line, "kind": s.kind, "address": address(s)}
                for s in others
            ]
        if len(span) > self.max_lines and symbol.children:
            hint = (
                f"… {target.shown}/{spec} spans {len(span):,} lines; showing its outline. "
                f"Use view {target.shown}:START-END or view {target.shown}/{spec}/MEMBER"
            )
            data["kind"] = "outline"
            body = self._outline([symbol], f"{target.shown}/{spec}")
            return ActionResult.success(f"{note}{hint}\n{body}", data=data)
        return ActionResult.success(note + numbered(span, first, symbol.end_line), data=data)

    def _big(self, target: Target, lines: list[str]) -> ActionResult:
        symbols = outline(target.path, "\n".join(lines))
        if not symbols:
            return self._head(target, lines, f"{len(lines):,} lines")
        hint = (
            f"… {target.shown}: {len(lines):,} lines; showing the outline. "
            f"Use view {target.shown}:START-END or view {target.shown}/SYMBOL"
        )
        body = self._outline(symbols, target.shown)
        data = {"path": target.shown, "kind": "outline", "lines": len(lines)}
        return ActionResult.success(f"{hint}\n{body}", data=data)

    def _outline(self, symbols: list[Symbol], spec: str) -> str:
        """The outline, cut at `max_outline` rows with the command that shows the rest."""
        body = outline_text(symbols, max_lines=self.max_outline)
        if body.endswith(" more symbols"):
            body += f"; skeleton {spec} --offset {self.max_outline} shows the rest"
        return body

    def _head(self, target: Target, lines: list[str] | None, why: str) -> ActionResult:
        head = (
            lines[: self.max_lines]
            if lines is not None
            else list(_stream_lines(target.path, 1, self.max_lines, target.root))
        )
        hint = (
            f"… {target.shown}: {why}; showing lines 1-{len(head)}. "
            f"Use view {target.shown}:START-END for more"
        )
        data = {
            "path": target.shown,
            "kind": "head",
            "lines": None if lines is None else len(lines),
        }
        return ActionResult.success(f"{numbered(head, 1, len(head))}\n{hint}", data=data)


def directory_tree(ctx: ToolContext, target: Target, max_entries: int) -> ActionResult:
    """The files under a directory as an indented tree, honouring `.gitignore`.

    When the full tree has more than `max_entries` lines, deeper directories are
    collapsed to `name/ (N files)` at the deepest level that fits; if even the
    top level does not fit, it is cut with a count of what was left out.
    """
    tree: dict[str, Any] = {}
    count = 0
    capped = False
    for path in walk(ctx.guard.root, target.path):
        if ctx.cancel.cancelled or count >= MAX_WALK:
            capped = True
            break
        node = tree
        *dirs, name = path.relative_to(target.path).parts
        for part in dirs:
            node = node.setdefault(part + "/", {})
        node[name] = None
        count += 1
    data: dict[str, Any] = {"path": target.shown, "kind": "directory", "files": count}
    if not tree:
        return ActionResult.success(f"{target.shown}/: no files (empty, or all ignored)", data=data)
    per_level: list[int] = []
    _count_levels(tree, 0, per_level)
    depth, running = 0, 0
    for level_count in per_level:
        if running + level_count > max_entries:
            break
        running += level_count
        depth += 1
    lines: list[str] = []
    _render(tree, 0, max(depth, 1), lines)
    more = f"{count:,}+" if capped else f"{count:,}"
    header = f"{target.shown}/ ({more} file{'' if more == '1' else 's'})"
    if depth == 0 and len(lines) > max_entries:
        left = len(lines) - max_entries
        lines = [*lines[:max_entries], f"… {left:,} more entries; view DIR/NAME opens one, "
                 f"grep -l PATTERN {target.shown} searches them all"]
    elif depth < len(per_level):
        lines.append(f"(directories below depth {max(depth, 1)} collapsed; view DIR to open one)")
    return ActionResult.success("\n".join([header, *lines]), data=data)


def _count_levels(node: dict[str, Any], level: int, per_level: list[int]) -> None:
    if len(per_level) <= level:
        per_level.append(0)
    per_level[level] += len(node)
    for child in node.values():
        if child is not None:
            _count_levels(child, level + 1, per_level)


def _file_count(node: dict[str, Any]) -> int:
    return sum(1 if child is None else _file_count(child) for child in node.values())


def _render(node: dict[str, Any], level: int, depth: int, lines: list[str]) -> None:
    indent = "  " * (level + 1)
    entries = sorted(node.items(), key=lambda item: (item[1] is None, item[0]))
    for name, child in entries:
        if child is None:
            lines.append(indent + name)
        elif level + 1 >= depth:
            files = _file_count(child)
            lines.append(f"{indent}{name} ({files:,} file{'' if files == 1 else 's'})")
        else:
            lines.append(indent + name)
            _render(child, level + 1, depth, lines)
