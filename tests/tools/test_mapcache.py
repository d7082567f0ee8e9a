"""The prefix's repo map: rebuilt only when a source file changes, kept on disk, redacted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from normalize.tools.code.mapcache import CachedRepoMap

KEY = "sk-ant-api03-" + "Zq9_" * 12


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "settings.py").write_text(f'SERVICE_TOKEN = "{KEY}"\n\n\nclass Settings:\n'
                                      "    pass\n")
    for n in range(4):
        (root / f"use_{n}.py").write_text(
            "from settings import SERVICE_TOKEN, Settings\n\n\n"
            f"def connect_{n}(config: Settings) -> str:\n    return SERVICE_TOKEN\n")
    (root / "notes.txt").write_text("not source\n")
    return root


def test_the_map_is_rebuilt_only_when_a_source_file_changes(tree: Path) -> None:
    mapped = CachedRepoMap(tree, 512)
    first = mapped.text()
    assert "class Settings:" in first and "settings.py:" in first
    assert mapped.text() is first and mapped.counts.built == 1  # nothing moved
    (tree / "notes.txt").write_text("another line that the map never reads\n")
    assert mapped.text() is first and mapped.counts.built == 1  # not a source file
    use = tree / "use_0.py"
    use.write_text("\n\n" + use.read_text())  # code moved down: rebuilt, the same text
    assert mapped.text() == first and mapped.counts.built == 2
    stat = use.stat()
    os.utime(use, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched: rebuilt
    assert mapped.text() == first and mapped.counts.built == 3
    (tree / "settings.py").write_text((tree / "settings.py").read_text()
                                      + "\n\ndef load_settings() -> Settings:\n"
                                        "    return Settings()\n")
    assert "def load_settings() -> Settings:" in mapped.text()
    assert mapped.counts.built == 4


def test_the_disk_copy_is_per_workspace_and_size_and_follows_the_files(
        tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = CachedRepoMap(tree, 512, cache).text()
    again = CachedRepoMap(tree, 512, cache)
    assert again.text() == first and again.counts.from_disk == 1 and again.counts.built == 0
    other_size = CachedRepoMap(tree, 64, cache)
    assert other_size.text() != first and other_size.counts.built == 1
    (tree / "use_1.py").write_text("def connect_1() -> None:\n    pass\n")
    changed = CachedRepoMap(tree, 512, cache)
    changed.text()
    assert changed.counts.built == 1  # the stored map was of other files
    (cache / next(p.name for p in cache.iterdir())).write_text("{not json")
    assert CachedRepoMap(tree, 512, cache).text()  # a broken copy is rebuilt, not an error


def test_a_secret_in_a_signature_never_reaches_the_map(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    text = CachedRepoMap(tree, 512, cache).text()
    assert "SERVICE_TOKEN = " in text and KEY not in text
    assert all(KEY not in p.read_text() for p in cache.iterdir())
    seen: list[str] = []

    def mine(found: str) -> str:
        seen.append(found)
        return found.replace("Settings", "[S]")

    assert "class [S]:" in CachedRepoMap(tree, 512, redact=mine).text() and seen
