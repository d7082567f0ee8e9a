"""A repo map: the definitions other files use most, ranked by PageRank, fitted to a token budget.

Files are the graph's nodes. A file that mentions an identifier another file
defines gets an edge to that file, weighted by how often it mentions it (the
square root, so one chatty file does not dominate) and by how telling the name
is: long `snake_case`/`CamelCase` names and type-like `Capitalised` names count
more, and so does a name the mentioning file imports by name or uses as a
decorator (`from attr import field`, `@define`: a lowercase word then is an
API); short
lowercase words otherwise, method names (an attribute may belong to any
object), exception classes (raised and caught everywhere, rarely the API),
`_private` names and names defined in many files (`run`, `name`) less. A `.pyi`
stub beside its `.py` is left out (it repeats the module's names). PageRank
over that graph ranks the files; each file's rank flows along its edges to the
definitions it uses, and the definitions are listed best first, grouped by
file, until the budget runs out (a token is taken as four characters).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from normalize.tools.code.grammars import language_for
from normalize.tools.code.outline import outline
from normalize.tools.code.symbols import Row, format_rows, rows

DEFINING_KINDS = frozenset({
    "class", "struct", "interface", "enum", "trait", "type", "record", "object", "module",
    "function", "method", "constructor", "macro", "constant", "declaration", "protocol",
    "extension",
})  # fmt: skip
MAX_FILE_BYTES = 1_000_000
CHARS_PER_TOKEN = 4
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FAMILIES = {"typescript": "js", "tsx": "js", "javascript": "js", "c": "c", "cpp": "c"}
_TELLING = re.compile(r"[a-z0-9]_[a-z]|[a-z][A-Z]|^[A-Z][a-z]+[A-Z]")
_DECORATOR = re.compile(r"^[ \t]*@([A-Za-z_][A-Za-z0-9_]*)\b(?!\.)", re.M)
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_EXCEPTION = re.compile(r"[a-z](Error|Exception|Warning)$")


@dataclass
class Definition:
    """One ranked definition: where it is and the outline row that shows it."""

    path: str
    row: Row
    index: int
    rank: float = 0.0


@dataclass
class RepoMap:
    """The ranked definitions, and the text fitted to the budget."""

    text: str
    shown: list[Definition] = field(default_factory=list)
    ranked: list[Definition] = field(default_factory=list)
    files: int = 0
    tokens: int = 0
    skipped: list[str] = field(default_factory=list)
    """Files left out for size (over `MAX_FILE_BYTES`)."""


def build_map(root: Path, paths: Iterable[Path], *, tokens: int = 1024,
              lines: bool = True) -> RepoMap:
    """The repo map of `paths` (files under `root`), at most `tokens` tokens long.

    Without `lines` the rows show no line ranges, so an edit that only moves
    code leaves the map's text as it was (the agent's cached prefix holds it).
    """
    rows_by_file: dict[str, list[Row]] = {}
    mentions: dict[str, Counter[str]] = {}
    named: dict[str, set[str]] = {}
    skipped: list[str] = []
    for path in _without_stubs(paths):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                skipped.append(path.relative_to(root).as_posix())
                continue
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        rel = path.relative_to(root).as_posix()
        rows_by_file[rel] = [r for r in rows(outline(path, text) or []) if r.symbol.name]
        mentions[rel] = Counter(_IDENTIFIER.findall(text))
        named[rel] = named_uses(text)
    ranked = rank(rows_by_file, mentions, {rel: _family(rel) for rel in rows_by_file}, named)
    found = fit(ranked, rows_by_file, tokens, files=len(rows_by_file), lines=lines)
    found.skipped = skipped
    return found


def _without_stubs(paths: Iterable[Path]) -> list[Path]:
    """The source files among `paths`, less each `.pyi` stub whose `.py` is there too."""
    found = [path for path in paths if language_for(path) is not None]
    present = set(found)
    return [p for p in found if not (p.suffix == ".pyi" and p.with_suffix(".py") in present)]


def named_uses(text: str) -> set[str]:
    """Names a file imports by name (`from m import a, b as c`) or uses as decorators."""
    found = set(_DECORATOR.findall(text))
    for clause in _FROM_IMPORT.findall(text):
        for part in clause.strip("()").split(","):
            words = part.split()
            if words and _IDENTIFIER.fullmatch(words[0]):
                found.add(words[0])
    return found


def _family(rel: str) -> str:
    """Languages whose files can use each other's definitions (`.ts` uses `.js`, `.c` uses `.h`)."""
    language = language_for(rel) or ""
    return _FAMILIES.get(language, language)


def rank(
    rows_by_file: dict[str, list[Row]],
    mentions: dict[str, Counter[str]],
    families: dict[str, str] | None = None,
    named: dict[str, set[str]] | None = None,
) -> list[Definition]:
    """Every definition, ranked by the PageRank of the files that use it (within a family)."""
    family = families or {}
    api = named or {}
    defined_in: dict[str, set[str]] = defaultdict(set)
    definitions: dict[tuple[str, str], list[Definition]] = defaultdict(list)
    for rel, file_rows in rows_by_file.items():
        for index, row in enumerate(file_rows):
            if row.symbol.kind not in DEFINING_KINDS:
                continue
            defined_in[row.symbol.name].add(rel)
            definitions[(rel, row.symbol.name)].append(Definition(rel, row, index))
    kinds: dict[str, set[str]] = defaultdict(set)
    for (_, name), found in definitions.items():
        kinds[name].update(d.row.symbol.kind for d in found)
    method_only = {name: kind_set <= {"method", "constructor"} for name, kind_set in kinds.items()}
    edges: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for user, counts in mentions.items():
        imported = api.get(user, set())
        for name, count in counts.items():
            owners = defined_in.get(name)
            if not owners:
                continue
            weight = _weight(name, len(owners), method_only[name], named=name in imported)
            weight *= math.sqrt(count)
            for owner in owners:
                if family.get(owner) != family.get(user):
                    continue
                if owner == user:
                    count_elsewhere = count - len(definitions[(owner, name)])
                    if count_elsewhere <= 0:
                        continue
                    edges[user][(owner, name)] = weight * 0.1  # use within its own file
                else:
                    edges[user][(owner, name)] = weight
    file_rank = _pagerank(list(rows_by_file), edges)
    for user, targets in edges.items():
        total = sum(targets.values())
        for (owner, name), weight in targets.items():
            share = file_rank[user] * weight / total
            found = definitions[(owner, name)]
            for definition in found:
                definition.rank += share / len(found)
    every = [d for found in definitions.values() for d in found]
    return sorted(every, key=lambda d: (-d.rank, d.path, d.index))


def _weight(name: str, defining_files: int, method: bool, *, named: bool = False) -> float:
    """How much a mention of `name` says about a dependency on where it is defined."""
    weight = 1.0
    telling = named or (len(name) >= 8 and _TELLING.search(name) is not None) or (
        name[0].isupper() and len(name) >= 4 and not name.isupper()
    )
    if _EXCEPTION.search(name):
        weight *= 0.5  # raised and caught all over; seldom what a reader looks for
    if telling:
        weight *= 10
    elif (name.isalpha() and name.islower()) or len(name) <= 2:
        weight *= 0.1  # `get`, `text`, `message`: a word, not a name
    elif name.isupper() and len(name) <= 5:
        weight *= 0.1  # `JSON`, `USAGE`: defined all over, meaning little
    if method:
        weight *= 0.2  # `x.from_dict` may be any class's `from_dict`
    if name.startswith("_"):
        weight *= 0.1
    if defining_files > 5:
        weight *= 0.1
    return weight


def _pagerank(
    nodes: list[str], edges: dict[str, dict[tuple[str, str], float]], *, damping: float = 0.85
) -> dict[str, float]:
    """PageRank by power iteration; a file with no outgoing edges spreads its rank evenly."""
    if not nodes:
        return {}
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for user, targets in edges.items():
        for (owner, _), weight in targets.items():
            out[user][owner] += weight
    count = len(nodes)
    rank_of = dict.fromkeys(nodes, 1.0 / count)
    for _ in range(50):
        nxt = dict.fromkeys(nodes, (1.0 - damping) / count)
        dangling = sum(rank_of[n] for n in nodes if not out.get(n))
        for node in nodes:
            nxt[node] += damping * dangling / count
        for source, weights in out.items():
            total = sum(weights.values())
            for target, share in weights.items():
                nxt[target] += damping * rank_of[source] * share / total
        delta = sum(abs(nxt[n] - rank_of[n]) for n in nodes)
        rank_of = nxt
        if delta < 1e-9:
            break
    return rank_of


def fit(
    ranked: list[Definition], rows_by_file: dict[str, list[Row]], tokens: int, *, files: int,
    lines: bool = True,
) -> RepoMap:
    """The most definitions (best first) whose text fits in `tokens`; binary search on the count."""
    low, high = 0, len(ranked)
    best = RepoMap(text="", ranked=ranked, files=files)
    while low <= high:
        middle = (low + high) // 2
        text = render(ranked[:middle], rows_by_file, lines=lines)
        used = math.ceil(len(text) / CHARS_PER_TOKEN)
        if used <= tokens:
            best = RepoMap(text, ranked[:middle], ranked, files, used)
            low = middle + 1
        else:
            high = middle - 1
    return best


def render(chosen: list[Definition], rows_by_file: dict[str, list[Row]], *,
           lines: bool = True) -> str:
    """Chosen definitions grouped by file (files in rank order), each with its parents' rows."""
    order: list[str] = []
    picked: dict[str, set[int]] = defaultdict(set)
    for definition in chosen:
        if definition.path not in picked:
            order.append(definition.path)
        file_rows = rows_by_file[definition.path]
        picked[definition.path].add(definition.index)
        depth = definition.row.depth
        for index in range(definition.index - 1, -1, -1):  # the enclosing class, namespace, …
            if depth == 0:
                break
            if file_rows[index].depth < depth:
                picked[definition.path].add(index)
                depth = file_rows[index].depth
    parts: list[str] = []
    for path in order:
        file_rows = rows_by_file[path]
        parts.append(f"{path}:")
        shown = [file_rows[i] for i in sorted(picked[path])]
        parts.extend(format_rows(shown, docs=False, indent="  ", lines=lines))
    return "\n".join(parts)
