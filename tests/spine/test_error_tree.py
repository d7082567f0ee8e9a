"""The error tree `normalize/errors.py` draws in its docstring is the real one.

An `ast` walk finds every class in `normalize/` that derives from `NormalizeError`
(through any module); each public one must be drawn under its first base that is
itself in the tree, and every class drawn must exist. A class whose name starts
with `_` is its module's own and is left out of the drawing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import normalize
from normalize import errors

PACKAGE = Path(normalize.__file__).resolve().parent
ROOT = "NormalizeError"
BRANCH = re.compile(r"^(?P<lead>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)")


def drawn(doc: str) -> dict[str, str | None]:
    """name -> its parent in a tree drawn with `├── ` / `└── ` four columns a level."""
    tree: dict[str, str | None] = {}
    path: list[str] = []
    for raw in doc.splitlines():
        line = raw[4:] if raw.startswith("    ") else raw
        if line.split(" ", 1)[0] == ROOT:
            tree[ROOT], path = None, [ROOT]
            continue
        found = BRANCH.match(line)
        if not found or not path:
            continue
        depth = len(found["lead"]) // 4 + 1
        path = [*path[:depth], found["name"]]
        tree[found["name"]] = path[depth - 1]
    return tree


def error_classes(sources: dict[str, str]) -> dict[str, str]:
    """Public classes deriving from NormalizeError -> their first base that does."""
    bases: dict[str, list[str]] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id if isinstance(b, ast.Name) else b.attr
                                    for b in node.bases if isinstance(b, ast.Name | ast.Attribute)]
    known = {ROOT}
    grew = True
    while grew:  # the closure of NormalizeError's subclasses, through any module
        more = {name for name, of in bases.items() if name not in known and known & set(of)}
        known |= more
        grew = bool(more)
    return {name: next(b for b in bases[name] if b in known)
            for name in sorted(known - {ROOT}) if not name.startswith("_")}


def problems(tree: dict[str, str | None], classes: dict[str, str]) -> list[str]:
    out = [f"{name} (a {base}) is not in the tree" for name, base in classes.items()
           if name not in tree]
    out += [f"{name} is drawn under {tree[name]}, but derives from {base}"
            for name, base in classes.items() if name in tree and tree[name] != base]
    out += [f"{name} is drawn but no class of that name derives from {ROOT}"
            for name in tree if name != ROOT and name not in classes]
    return out


def test_every_error_class_is_in_the_tree_under_its_base() -> None:
    sources = {str(p): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}
    classes = error_classes(sources)
    assert len(classes) >= 20  # the walk found them (it is not vacuously true)
    found = problems(drawn(errors.__doc__ or ""), classes)
    assert not found, "\n".join(found)


DOC = """
    NormalizeError                 base
    ├── UsageError                 bad arguments
    │   └── ConfigError            a bad file
    │                              (a second line of its text)
    └── ProviderError              a provider failed
        └── MissingKeyError        no key
"""


def test_the_check_fails_on_a_missing_class_a_wrong_base_and_a_class_gone() -> None:
    tree = drawn(DOC)
    assert tree == {"NormalizeError": None, "UsageError": "NormalizeError",
                    "ConfigError": "UsageError", "ProviderError": "NormalizeError",
                    "MissingKeyError": "ProviderError"}
    source = ("class NormalizeError(Exception): ...\n"
              "class UsageError(NormalizeError): ...\n"
              "class ConfigError(UsageError): ...\n"
              "class ProviderError(NormalizeError): ...\n"
              "class MissingKeyError(ProviderError): ...\n")
    assert problems(tree, error_classes({"errors.py": source})) == []
    elsewhere = ("from errors import ConfigError, UsageError\n"
                 "class LimitError(ConfigError): ...\n"          # in another module
                 "class _Private(LimitError): ...\n"             # its module's own: left out
                 "class Unrelated(ValueError): ...\n")
    assert problems(tree, error_classes({"errors.py": source, "bounds.py": elsewhere})) == [
        "LimitError (a ConfigError) is not in the tree"]
    moved = source.replace("MissingKeyError(ProviderError)", "MissingKeyError(UsageError)")
    assert problems(tree, error_classes({"errors.py": moved})) == [
        "MissingKeyError is drawn under ProviderError, but derives from UsageError"]
    gone = source.replace("class ConfigError(UsageError): ...\n", "")
    assert problems(tree, error_classes({"errors.py": gone})) == [
        "ConfigError is drawn but no class of that name derives from NormalizeError"]
