"""Outline quality against Universal Ctags: recall and precision per language, and view exactness.

    python bench/codeintel.py                    # the vendored fixtures (tests/fixtures/code)
    python bench/codeintel.py --download         # and pinned packages: click, networkx (PyPI),
                                                 # express, node-addon-api (npm)
    python bench/codeintel.py --tree DIR ...     # any directories

What is compared: definitions outside function bodies, types and callables
(class, struct, interface, enum, trait, module, typedef; function, method,
constructor, prototype), matched by name within each file (a multiset, so two
overloads must both be found). ctags tags whose scope is a function or method
are inside a body and are left out. Recall is the share of ctags' definitions
the outline has; precision the share of the outline's that ctags has. View
exactness: for each matched definition, `name@LINE` (LINE from ctags) must pick
exactly one symbol whose lines hold LINE — what `view PATH/name@LINE` shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from normalize.tools.code import find_symbols, language_for, outline

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "code"
TYPES = frozenset({"class", "struct", "interface", "enum", "trait", "module", "typedef", "union",
                   "record", "object", "protocol", "type", "singleton", "extension"})  # fmt: skip
CALLABLES = frozenset({"function", "method", "constructor", "prototype", "singletonMethod",
                       "declaration", "func", "subroutine", "member", "methodSpec",
                       "alias"})  # fmt: skip
BODY_SCOPES = frozenset({"function", "method", "func", "constructor", "singletonMethod"})
"""A tag scoped to one of these is inside a body (Python's methods are ctags' `member`s)."""
CTAGS_LANGUAGE = {
    "python": "Python", "javascript": "JavaScript", "typescript": "TypeScript",
    "tsx": "TypeScript", "go": "Go", "rust": "Rust", "java": "Java", "c": "C", "cpp": "C++",
    "ruby": "Ruby", "csharp": "C#", "php": "PHP", "bash": "Sh", "kotlin": "Kotlin", "lua": "Lua",
}  # fmt: skip
"""Swift and Scala have no parser in Universal Ctags 5.9: they are listed without figures."""
DOWNLOADS = {
    "pip": ("click==8.1.7", "networkx==3.6.1"),
    "npm": ("express@4.21.2", "node-addon-api@8.3.1"),
}


@dataclass
class Score:
    """One language's counts."""

    files: int = 0
    ctags: int = 0
    ours: int = 0
    matched: int = 0
    viewed: int = 0
    exact: int = 0
    missed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)


def ctags_definitions(path: Path, language: str) -> list[tuple[str, int]] | None:
    """(name, line) of ctags' definitions outside function bodies; None without a parser."""
    ctags = shutil.which("ctags")
    if ctags is None or language not in CTAGS_LANGUAGE:
        return None
    lang = CTAGS_LANGUAGE[language]
    argv = [ctags, "--output-format=json", "--fields=+nKZ", f"--language-force={lang}",
            "--extras=-{anonymous}", "-f", "-", str(path)]  # fmt: skip
    if lang in ("C", "C++"):
        argv.insert(1, f"--kinds-{lang}=+p")
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    found = []
    for line in out.splitlines():
        tag = json.loads(line)
        kind = tag.get("kind", "")
        scope = tag.get("scopeKind")
        if kind not in TYPES | CALLABLES or scope in BODY_SCOPES or (
            scope == "member" and lang == "Python"
        ):
            continue
        if kind == "member" and lang != "Python":  # Python's methods; elsewhere data members
            continue
        name = tag["name"]
        if name.startswith("operator"):  # `operator !=` is the outline's `operator!=`
            name = "operator " + name[8:].strip() if name[8:9].isspace() and name[9:10].isalpha() \
                else name.replace(" ", "")
        else:
            name = name.split(".")[-1].split(":")[-1]  # Lua's `M.new`, `M:add`
        if name.startswith("__anon") or name == "<lambda>":
            continue
        found.append((name, int(tag["line"])))
    return sorted(set(found))  # JavaScript: `res.x = function x()` is tagged twice


def score_file(path: Path, score: Score) -> None:
    language = language_for(path)
    assert language is not None
    text = path.read_text(encoding="utf-8", errors="replace")
    symbols = outline(path, text) or []
    theirs = ctags_definitions(path, language)
    score.files += 1
    ours_list = [s for top in symbols for s in top.walk()
                 if s.kind in TYPES | CALLABLES | {"overload", "test"}]  # fmt: skip
    # ctags names `TEST(Suite, Name) {…}` after its macro; the outline after the test
    ours = Counter(s.signature.split("(")[0] if s.kind == "test" else s.name.split("<")[0]
                   for s in ours_list)  # fmt: skip
    score.ours += sum(ours.values())
    if theirs is None:
        return
    wanted = Counter(name for name, _ in theirs)
    score.ctags += sum(wanted.values())
    both = wanted & ours
    score.matched += sum(both.values())
    score.missed += [f"{path.name}:{n}" for n in (wanted - ours).elements()]
    score.extra += [f"{path.name}:{n}" for n in (ours - wanted).elements()]
    for name, line in theirs:
        if not both.get(name):
            continue
        score.viewed += 1
        hits = find_symbols(symbols, f"{name}@{line}")
        score.exact += len(hits) == 1 and hits[0].first_line <= line <= hits[0].end_line


def download(into: Path) -> list[Path]:
    """The pinned packages' sources, unpacked under `into`."""
    trees = []
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:"]
    subprocess.run([*pip, "-d", str(into), *DOWNLOADS["pip"]], check=True)
    for wheel in into.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(into / wheel.stem)
        trees.append(into / wheel.stem)
    npm = shutil.which("npm")
    for package in DOWNLOADS["npm"] if npm else ():
        subprocess.run([npm, "pack", "-q", package], cwd=into, check=True, capture_output=True)
    for tgz in into.glob("*.tgz"):
        with tarfile.open(tgz) as archive:
            archive.extractall(into / tgz.stem, filter="data")
        trees.append(into / tgz.stem)
    return trees


def measure(trees: list[Path]) -> dict[str, Score]:
    scores: dict[str, Score] = {}
    for tree in trees:
        for path in sorted(tree.rglob("*")):
            language = language_for(path) if path.is_file() else None
            if language is None or ("test" in path.parts[-1].lower() and tree != FIXTURES):
                continue
            if tree == FIXTURES and "stress" in path.relative_to(tree).parts:
                continue  # written to break parsers, see tests/fixtures/code/stress/README.md
            scores.setdefault("typescript" if language == "tsx" else language, Score())
            score_file(path, scores["typescript" if language == "tsx" else language])
    return scores


def table(scores: dict[str, Score]) -> str:
    rows = ["| language | files | ctags defs | outline defs | recall | precision | view exact |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for language, s in sorted(scores.items()):
        if not s.ctags:
            rows.append(f"| {language} | {s.files} | (no ctags parser) | {s.ours} | – | – | – |")
            continue
        recall = s.matched / s.ctags
        precision = s.matched / s.ours if s.ours else 0.0
        exact = s.exact / s.viewed if s.viewed else 0.0
        rows.append(f"| {language} | {s.files} | {s.ctags} | {s.ours} | {recall:.2f} | "
                    f"{precision:.2f} | {exact:.2f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--download", action="store_true")
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--misses", action="store_true", help="list what each side lacks")
    args = parser.parse_args()
    if shutil.which("ctags") is None:
        sys.exit("ctags not found: apt-get install universal-ctags")
    with tempfile.TemporaryDirectory() as scratch:
        trees = [FIXTURES, *args.tree]
        if args.download:
            trees += download(Path(scratch))
        scores = measure(trees)
    print(table(scores))
    if args.misses:
        for language, s in sorted(scores.items()):
            print(f"{language}: missed {s.missed[:20]} extra {s.extra[:20]}")


if __name__ == "__main__":
    main()
