"""The result cache: long outputs reach the reader as a preview plus an id to `fetch`.

Three strategies share one protocol: `NoCache` keeps nothing, `MemoryCache`
keeps results in this process (LRU, TTL since last use, bounded in bytes), and
`PersistentCache` keeps one file per result under a directory, so `fetch`
works after a task resumes in a new process.

What a cache keeps and previews is redacted: the model and people read it.
The exact output stays on the `ActionResult` for what executes (`capture`).

A preview shows the lines that look like errors first (with their line
numbers, so a reader can fetch a range around them), then the first lines,
and ends with a line such as `… 412 more lines — fetch r7`.

Results are sized by intent: what the reader explicitly asked to read (a
`view`, a `fetch`) comes back whole up to a generous bound (`asked_lines`,
`asked_chars`; `preview_asked`), and only incidental output (test runs,
builds, wide greps) is cut to the short preview.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from normalize.errors import ConfigError
from normalize.fsutil import private_dirs
from normalize.keys import parse_table
from normalize.redact import redact as _shape_redact  # without a redactor: shapes only
from normalize.tables import CACHE_STRATEGIES, CacheSettings

Redact = Callable[[str], str]

__all__ = [
    "STRATEGIES",
    "MemoryCache",
    "NoCache",
    "PersistentCache",
    "ResultCache",
    "SaysRetention",
    "SizedByIntent",
    "build_preview",
    "cache_from",
    "make_cache",
]

STRATEGIES = CACHE_STRATEGIES
DEFAULT_PREVIEW_LINES = 20
DEFAULT_PREVIEW_CHARS = 2_000
DEFAULT_ASKED_LINES = 400
DEFAULT_ASKED_CHARS = 16_000
DEFAULT_TTL_SECONDS = 600.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_ERROR_HITS = 5
_ID_RE = re.compile(r"^r([1-9][0-9]*)$")
_FILE_RE = re.compile(r"^r([1-9][0-9]*)\.txt$")

# Lines that say something failed; a match anywhere in the line counts.
_STRONG_ERROR_RE = re.compile(
    r"(?i:\berror\b)"  # gcc/rustc/mypy "error:", "ERROR collecting"
    r"|\b\w*(?:Error|Exception):"  # Python exceptions, "Error: ..."
    r"|\bFAILED\b|\bFAIL\b|\b\d+ failed\b|\bERR!"  # pytest, go, npm
    r"|^Traceback \(most recent call last\)"
    r"|^E {3}"  # pytest's assertion detail
    r"|\bpanicked at\b|\bfatal:"
)
_INDENT = ("    ", "\t")  # tracebacks and test reports quote source indented; errors are not
# `path:line:` diagnostics (ruff, gcc, go vet). Weaker: grep output is all of them.
_DIAGNOSTIC_RE = re.compile(r"^\s*[\w./\\-]+\.\w+:\d+(?::\d+)?:? ")


@runtime_checkable
class ResultCache(Protocol):
    """Keeps long results so a reader sees a preview and can fetch the rest."""

    def store(self, content: str) -> str:
        """Keep `content`; returns its id (`r1`, `r2`, …)."""
        ...

    def retrieve(self, cache_id: str) -> str | None:
        """The content kept under `cache_id`, or None when unknown or expired."""
        ...

    def preview(self, content: str) -> tuple[str, str | None]:
        """`(content, None)` when short; otherwise `(summary, id)` with the content kept."""
        ...


@runtime_checkable
class SizedByIntent(Protocol):
    """A cache that shows what the reader asked to read whole, up to a bound of its own."""

    @property
    def asked_bound(self) -> tuple[int, int]:
        """(lines, characters) up to which an asked-for result is shown whole."""
        ...

    def preview_asked(self, content: str) -> tuple[str, str | None]:
        """Like `preview`, with the asked-for bound."""
        ...


@runtime_checkable
class SaysRetention(Protocol):
    """A cache that can say how long it keeps results (for a `fetch` that finds nothing)."""

    @property
    def retention(self) -> str: ...


def _is_short(content: str, lines: int, chars: int) -> bool:
    return len(content) <= chars and len(content.splitlines()) <= lines


def _error_hits(lines: list[str]) -> list[int]:
    """Indexes of error-looking lines: strong matches first, diagnostics as a fallback."""
    strong = [i for i, line in enumerate(lines)  # an indented line is source or prose (a
              if not line.startswith(_INDENT) and _STRONG_ERROR_RE.search(line)]  # docstring)
    if len(strong) >= MAX_ERROR_HITS:
        return strong
    diagnostics = [i for i, line in enumerate(lines) if _DIAGNOSTIC_RE.match(line)]
    if len(diagnostics) * 2 > len(lines):  # most lines look like this: not a signal
        return strong
    return sorted(set(strong) | set(diagnostics))


def _said(line: str, first: list[str]) -> bool:
    """Whether an error line repeats one of the first lines (a test tool's verdict and first
    failure lead its log; pytest's cut summary line is the start of one of them)."""
    text = line.strip().removesuffix("...")
    return bool(text) and any(shown.startswith(text) for shown in first)


def _clip(line: str, width: int) -> tuple[str, bool]:
    if len(line) <= width:
        return line, False
    return line[: width - 1] + "…", True


def _error_rows(lines: list[str], hits: list[int], budget: int,
                first: list[str] | None = None) -> list[int]:
    """Line indexes to show for the first hits, with as much context as fits `budget` rows
    (context that repeats one of the `first` lines left out)."""
    hits = hits[:MAX_ERROR_HITS]
    for before, after in ((1, 1), (0, 1)):
        rows: set[int] = set()
        for i in hits:
            rows.add(i)
            rows.update(
                j
                for j in range(max(i - before, 0), min(i + after + 1, len(lines)))
                if lines[j].strip() and not _said(lines[j], first or [])
            )
        if len(rows) <= budget:
            return sorted(rows)
    return hits[: max(budget, 0)]


def build_preview(
    content: str,
    cache_id: str | None,
    *,
    preview_lines: int = DEFAULT_PREVIEW_LINES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    note: str = "",
) -> str:
    """The summary of a long `content`: error lines, first lines, and how much is left.

    The last line names `cache_id` for `fetch`; without an id it says `note`
    instead (why nothing can be fetched). The result never exceeds
    `preview_lines` lines or `preview_chars` characters and depends only on
    its arguments.
    """
    lines = content.splitlines()
    width = max(40, min(200, preview_chars // 4))
    budget = preview_lines - 1  # the last line is reserved
    error_budget = budget // 2  # two of these rows are headers
    hits = _error_hits(lines)
    # Errors among the first lines are shown there; only later ones get a section.
    first = [line.strip() for line in lines[:budget - error_budget]]
    late = [i for i in hits if i >= budget - error_budget and not _said(lines[i], first)]
    rows = _error_rows(lines, late, error_budget - 2, first) if late else []
    head = min(len(lines), budget - (len(rows) + 2 if rows else 0))
    digits = len(str(len(lines)))

    def render(rows: list[int], head: int) -> tuple[list[str], str]:
        out: list[str] = []
        cut = False
        shown = 0
        if rows:
            out.append(f"errors ({len(hits)} found; showing line numbers):")
            for i in rows:
                text, was_cut = _clip(lines[i], width)
                cut = cut or was_cut
                out.append(f"{i + 1:>{digits}}: {text}")
            if any(line.strip() for line in lines[:head]):  # never a heading over nothing
                out.append("first lines:")
        for line in lines[:head]:
            text, was_cut = _clip(line, width)
            cut = cut or was_cut
            shown += min(len(line), width - 1) + 1
            out.append(text)
        more_lines = len(lines) - head
        more_chars = max(len(content) - shown, 0)
        parts = []
        if more_lines:
            parts.append(f"{more_lines} more line{'s' if more_lines != 1 else ''}")
        if cut or (more_lines and more_chars > 500 * more_lines):
            chars = f"{more_chars} more characters"
            parts.append(f"({chars})" if parts else chars)
        where = f"fetch {cache_id}" if cache_id else (note or "not kept")
        return out, f"… {' '.join(parts) or 'more'} — {where}"

    body, last = render(rows, head)
    while sum(len(line) + 1 for line in body) + len(last) > preview_chars:
        if head > 3 or (not rows and head > 1):
            head -= 1
        elif rows:
            rows = rows[:-1]
        else:
            break
        body, last = render(rows, head)
    text = "\n".join(body)
    room = preview_chars - len(last) - 1
    if len(text) > room:
        text = text[: max(room - 1, 0)] + "…"
    return f"{text}\n{last}" if text else last


@dataclass(frozen=True)
class _PreviewShape:
    lines: int = DEFAULT_PREVIEW_LINES
    chars: int = DEFAULT_PREVIEW_CHARS
    asked_lines: int = DEFAULT_ASKED_LINES
    asked_chars: int = DEFAULT_ASKED_CHARS

    def __post_init__(self) -> None:
        if self.lines < 3:
            raise ConfigError(f"cache preview_lines must be at least 3, not {self.lines}")
        if self.chars < 80:
            raise ConfigError(
                f"cache preview_length (preview_chars) must be at least 80, not {self.chars}"
            )

    @property
    def asked(self) -> _PreviewShape:
        """The shape for output the reader asked for: whole up to the asked bound."""
        return _PreviewShape(self.asked_lines, self.asked_chars, self.asked_lines,
                             self.asked_chars)


class _SizedByIntent(ABC):
    """`preview_asked` and `asked_bound` for the caches below (each keeps a `_shape`)."""

    _shape: _PreviewShape

    @property
    def asked_bound(self) -> tuple[int, int]:
        """(lines, characters) up to which an asked-for result is shown whole."""
        return self._shape.asked_lines, self._shape.asked_chars

    def preview(self, content: str) -> tuple[str, str | None]:
        return self._preview(content, self._shape)

    def preview_asked(self, content: str) -> tuple[str, str | None]:
        """Like `preview`, with the asked-for bound: what was asked for comes back whole.

        A whole result longer than an ordinary preview is kept too, so a reader
        that shows less of it (a person's terminal) can say how to see the rest.
        """
        shown, cache_id = self._preview(content, self._shape.asked)
        if cache_id is None and not _is_short(shown, self._shape.lines, self._shape.chars):
            cache_id = self._kept(shown)
        return shown, cache_id

    @abstractmethod
    def _preview(self, content: str, shape: _PreviewShape) -> tuple[str, str | None]:
        """The preview of `content` in `shape`; each cache keeps (or does not keep) it."""

    def _keep(self, content: str) -> str | None:
        """Keep already-redacted `content` and give its id (None: this cache keeps nothing)."""
        del content
        return None

    def _kept(self, content: str) -> str | None:
        """`_keep`, with a result larger than the cache not kept."""
        try:
            return self._keep(content)
        except ValueError:  # larger than the cache
            return None


class NoCache(_SizedByIntent):
    """Keeps nothing: a long result is cut to its preview and the rest is lost."""

    retention = "caching is off"

    def __init__(
        self,
        *,
        preview_lines: int = DEFAULT_PREVIEW_LINES,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        asked_lines: int = DEFAULT_ASKED_LINES,
        asked_chars: int = DEFAULT_ASKED_CHARS,
        redact: Redact | None = None,
    ) -> None:
        self._shape = _PreviewShape(preview_lines, preview_chars, max(asked_lines, preview_lines),
                                    max(asked_chars, preview_chars))
        self._lock = threading.Lock()
        self._next = 1
        self.redact: Redact = redact or _shape_redact

    def store(self, content: str) -> str:
        """Returns a fresh id, but nothing is kept: `retrieve` never finds it."""
        del content
        with self._lock:
            cache_id = f"r{self._next}"
            self._next += 1
        return cache_id

    def retrieve(self, cache_id: str) -> str | None:
        del cache_id
        return None

    def _preview(self, content: str, shape: _PreviewShape) -> tuple[str, str | None]:
        content = self.redact(content)
        if _is_short(content, shape.lines, shape.chars):
            return content, None
        summary = build_preview(
            content,
            None,
            preview_lines=shape.lines,
            preview_chars=shape.chars,
            note="not kept (caching is off)",
        )
        return summary, None


def _digest(content: str) -> str:
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _size(content: str) -> int:
    return len(content.encode("utf-8", "surrogatepass"))


def _format_seconds(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


class MemoryCache(_SizedByIntent):
    """Keeps results in this process: least recently used first out, expired after `ttl_seconds`.

    The TTL counts from the last `store` or `retrieve` of a result; the total
    size is bounded by `max_bytes` (UTF-8). A result larger than the bound is
    previewed without an id.
    """

    def __init__(
        self,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        preview_lines: int = DEFAULT_PREVIEW_LINES,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        *,
        asked_lines: int = DEFAULT_ASKED_LINES,
        asked_chars: int = DEFAULT_ASKED_CHARS,
        clock: Callable[[], float] = time.monotonic,
        ids: Iterator[int] | None = None,
        id_prefix: str = "r",
        redact: Redact | None = None,
    ) -> None:
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ConfigError(f"cache ttl_seconds must be positive, not {ttl_seconds}")
        if max_bytes <= 0:
            raise ConfigError(f"cache max_bytes must be positive, not {max_bytes}")
        self.ttl_seconds = ttl_seconds
        self.max_bytes = max_bytes
        self._shape = _PreviewShape(preview_lines, preview_chars, max(asked_lines, preview_lines),
                                    max(asked_chars, preview_chars))
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, int, float]] = OrderedDict()
        self._by_digest: dict[str, str] = {}
        self._bytes = 0
        self._ids = ids if ids is not None else itertools.count(1)
        self._prefix = id_prefix
        self.redact: Redact = redact or _shape_redact

    @property
    def retention(self) -> str:
        if self.ttl_seconds is None:
            return "results are kept while this process runs"
        return f"results are kept for {_format_seconds(self.ttl_seconds)} after their last use"

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._entries)

    def store(self, content: str) -> str:
        """Keep `content`, redacted; returns its id."""
        return self._keep(self.redact(content))

    def _keep(self, content: str) -> str:
        size = _size(content)
        if size > self.max_bytes:
            raise ValueError(f"result of {size} bytes exceeds the cache bound of {self.max_bytes}")
        digest = _digest(content)
        with self._lock:
            self._expire()
            known = self._by_digest.get(digest)
            if known is not None and known in self._entries:
                self._touch(known)
                return known
            cache_id = f"{self._prefix}{next(self._ids)}"
            self._entries[cache_id] = (content, size, self._clock())
            self._by_digest[digest] = cache_id
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))
            return cache_id

    def retrieve(self, cache_id: str) -> str | None:
        with self._lock:
            self._expire()
            if cache_id not in self._entries:
                return None
            self._touch(cache_id)
            return self._entries[cache_id][0]

    def _preview(self, content: str, shape: _PreviewShape) -> tuple[str, str | None]:
        content = self.redact(content)
        if _is_short(content, shape.lines, shape.chars):
            return content, None
        try:
            cache_id: str | None = self._keep(content)
        except ValueError:
            cache_id = None
        summary = build_preview(
            content,
            cache_id,
            preview_lines=shape.lines,
            preview_chars=shape.chars,
            note="not kept (larger than the cache)",
        )
        return summary, cache_id

    def _touch(self, cache_id: str) -> None:
        content, size, _ = self._entries[cache_id]
        self._entries[cache_id] = (content, size, self._clock())
        self._entries.move_to_end(cache_id)

    def _drop(self, cache_id: str) -> None:
        content, size, _ = self._entries.pop(cache_id)
        self._bytes -= size
        self._by_digest.pop(_digest(content), None)

    def _expire(self) -> None:
        if self.ttl_seconds is None:
            return
        deadline = self._clock() - self.ttl_seconds
        while self._entries:
            oldest = next(iter(self._entries))
            if self._entries[oldest][2] > deadline:
                break
            self._drop(oldest)


class PersistentCache(_SizedByIntent):
    """Keeps each result as `<directory>/rN.txt`, so ids survive a new process.

    New ids continue after the highest id on disk. With `max_bytes`, the
    oldest results are deleted to stay under the bound; with `ttl_seconds`,
    results older than that (by file time) are gone.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        preview_lines: int = DEFAULT_PREVIEW_LINES,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        max_bytes: int | None = None,
        ttl_seconds: float | None = None,
        asked_lines: int = DEFAULT_ASKED_LINES,
        asked_chars: int = DEFAULT_ASKED_CHARS,
        redact: Redact | None = None,
    ) -> None:
        if max_bytes is not None and max_bytes <= 0:
            raise ConfigError(f"cache max_bytes must be positive, not {max_bytes}")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ConfigError(f"cache ttl_seconds must be positive, not {ttl_seconds}")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._shape = _PreviewShape(preview_lines, preview_chars, max(asked_lines, preview_lines),
                                    max(asked_chars, preview_chars))
        self._lock = threading.Lock()
        self._by_digest: dict[str, str] = {}
        self._next = max(self._ids_on_disk(), default=0) + 1
        self.redact: Redact = redact or _shape_redact

    @property
    def retention(self) -> str:
        if self.ttl_seconds is not None:
            return f"results are kept for {_format_seconds(self.ttl_seconds)} with the task"
        return "results are kept with the task"

    def store(self, content: str) -> str:
        """Keep `content`, redacted, in a file only the owner can read; returns its id."""
        return self._keep(self.redact(content))

    def _keep(self, content: str) -> str:
        digest = _digest(content)
        with self._lock:
            known = self._by_digest.get(digest)
            if known is not None and self._path(known).exists():
                return known
            private_dirs(self.directory)
            while True:
                cache_id = f"r{self._next}"
                self._next += 1
                try:  # claim the id; another writer may have taken it
                    os.close(os.open(self._path(cache_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                     0o600))
                except FileExistsError:
                    continue
                break
            temporary = self.directory / f".{cache_id}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
                fh.write(content)
            os.replace(temporary, self._path(cache_id))
            self._by_digest[digest] = cache_id
            if self.max_bytes is not None:
                self._shrink(keep=cache_id)
            return cache_id

    def retrieve(self, cache_id: str) -> str | None:
        if not _ID_RE.match(cache_id):
            return None
        path = self._path(cache_id)
        try:
            if self.ttl_seconds is not None:
                if path.stat().st_mtime < time.time() - self.ttl_seconds:
                    return None
            with path.open(encoding="utf-8", errors="surrogatepass", newline="") as fh:
                return fh.read()
        except OSError:
            return None

    def _preview(self, content: str, shape: _PreviewShape) -> tuple[str, str | None]:
        content = self.redact(content)
        if _is_short(content, shape.lines, shape.chars):
            return content, None
        cache_id = self._keep(content)
        summary = build_preview(
            content, cache_id, preview_lines=shape.lines, preview_chars=shape.chars
        )
        return summary, cache_id

    def _path(self, cache_id: str) -> Path:
        return self.directory / f"{cache_id}.txt"

    def _ids_on_disk(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return [int(m.group(1)) for name in names if (m := _FILE_RE.match(name))]

    def _shrink(self, keep: str) -> None:
        assert self.max_bytes is not None
        ids = sorted(self._ids_on_disk())
        sizes = {n: self._path(f"r{n}").stat().st_size for n in ids}
        total = sum(sizes.values())
        for n in ids:
            if total <= self.max_bytes or f"r{n}" == keep:
                break
            self._path(f"r{n}").unlink(missing_ok=True)
            total -= sizes[n]


def make_cache(
    strategy: str,
    *,
    directory: Path | str | None = None,
    memory_ids: Iterator[int] | None = None,
    redact: Redact | None = None,
    **options: Any,
) -> ResultCache:
    """A cache for a `[workflow.cache]` table: `strategy` plus its options.

    The table is checked against the keys `CacheSettings` declares (a bad
    strategy, an unknown option or a wrong type is a `ConfigError` naming it).
    """
    settings = parse_table(CacheSettings, {**options, "strategy": strategy}, "cache",
                           name=lambda key: f"cache {key}")
    return cache_from(settings, directory=directory, memory_ids=memory_ids, redact=redact)


def cache_from(settings: CacheSettings, *, directory: Path | str | None = None,
               memory_ids: Iterator[int] | None = None, redact: Redact | None = None,
               ) -> ResultCache:
    """The cache a typed `[workflow.cache]` table asks for (its strategy: `persistent` if unset)."""
    strategy = settings.strategy or "persistent"
    options = settings.options()
    if "preview_length" in options:
        options["preview_chars"] = options.pop("preview_length")
    preview = {k: options[k] for k in ("preview_lines", "preview_chars", "asked_lines",
                                       "asked_chars") if k in options}
    if strategy == "none":
        return NoCache(**preview, redact=redact)
    if strategy == "memory":
        return MemoryCache(
            ttl_seconds=options.get("ttl_seconds", DEFAULT_TTL_SECONDS),
            max_bytes=options.get("max_bytes", DEFAULT_MAX_BYTES),
            **preview,
            ids=memory_ids,
            id_prefix="r" if memory_ids is None else "m",
            redact=redact,
        )
    if directory is None:
        raise ConfigError("the persistent cache needs a directory")
    return PersistentCache(
        directory,
        max_bytes=options.get("max_bytes"),
        ttl_seconds=options.get("ttl_seconds"),
        **preview,
        redact=redact,
    )


class CacheSet:
    """The caches of one task: its default, plus one per strategy a scope asks for.

    A scope's `cache` table picks how its results are kept (`none`, `memory`,
    `persistent`) and previewed. Ids stay unique across the set: persistent
    results are `rN` (one directory, ids claimed on disk), memory ones `mN`
    (one counter), so `fetch` finds any of them by id alone.
    """

    def __init__(self, default: ResultCache, directory: Path | str | None = None, *,
                 redact: Redact | None = None) -> None:
        self.default = default
        self.redact = redact
        self.directory = None if directory is None else Path(directory)
        self._memory_ids = itertools.count(1)
        self._scoped: dict[str, ResultCache] = {}
        self._lock = threading.Lock()

    def for_table(self, table: Mapping[str, Any] | None) -> ResultCache:
        """The cache for a scope's `[cache]` table (None: the task's default)."""
        if not table:
            return self.default
        key = json.dumps(dict(table), sort_keys=True)
        with self._lock:
            cache = self._scoped.get(key)
            if cache is None:
                settings = parse_table(CacheSettings, table, "cache",
                                       name=lambda name: f"cache {name}")
                cache = cache_from(settings, directory=self.directory,
                                   memory_ids=self._memory_ids, redact=self.redact)
                self._scoped[key] = cache
            return cache

    def retrieve(self, cache_id: str) -> str | None:
        """The text behind any id this task's caches gave out."""
        with self._lock:
            caches = [self.default, *self._scoped.values()]
        for cache in caches:
            text = cache.retrieve(cache_id)
            if text is not None:
                return text
        return None
