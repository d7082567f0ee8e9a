"""One meaning per name: no two public classes of `normalize/` share a name.

An `ast` walk reads the classes each module defines at its top level (private
ones, `_Like`, left out). Two classes with one name are two meanings a reader
must tell apart by their import; the pairs below are one meaning written twice
on purpose, each with why.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import normalize

PACKAGE = Path(normalize.__file__).resolve().parent

SAME_MEANING: dict[str, str] = {
    "Reply": "both public: `normalize.Reply` answers a task, `normalize.testing.Reply` is "
             "a fake server's; renaming either breaks users' code",
    "Spawner": "the Protocol the spawn tool needs (subtasks/children.py) and its implementation",
    "TaskStore": "the Protocol a lock needs of its store (store/ownership.py) and the store",
    "TextDelta": "a provider's streamed piece of text and the event that journals it",
    "ThinkingDelta": "a provider's streamed piece of thinking and the event that journals it",
}


def public_classes(root: Path) -> dict[str, list[str]]:
    """Each public top-level class name under `root`, with the files defining it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(path.relative_to(root.parent).as_posix())
    return found


def test_no_two_public_classes_share_a_name() -> None:
    twice = {name: files for name, files in public_classes(PACKAGE).items()
             if len(files) > 1 and name not in SAME_MEANING}
    assert not twice, "one name, two classes (rename one so the names say which):\n" + \
        "\n".join(f"{name}: {', '.join(files)}" for name, files in sorted(twice.items()))


def test_every_same_meaning_pair_is_still_two() -> None:
    found = public_classes(PACKAGE)
    stale = [name for name in SAME_MEANING if len(found.get(name, [])) < 2]
    assert not stale, f"names defined once now (delete them from SAME_MEANING): {stale}"


def test_the_walk_finds_a_second_class(tmp_path: Path) -> None:
    """The walk can fail: two files defining `Step` are both named."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("class Step:\n    pass\n\nclass _Hidden:\n    pass\n")
    (package / "sub" / "b.py").write_text("class Step:\n    pass\n\nclass _Hidden:\n    pass\n")
    assert dict(public_classes(package)) == {"Step": ["pkg/a.py", "pkg/sub/b.py"]}
