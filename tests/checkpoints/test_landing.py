"""A child's merge never writes through a symlink in the parent's workspace, and leaves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from normalize.checkpoints import isolate
from normalize.checkpoints.landing import MergeError
from normalize.checkpoints.shadow import ShadowRepo

PATCH = b"""diff --git a/in.txt b/in.txt
new file mode 100644
--- /dev/null
+++ b/in.txt
@@ -0,0 +1 @@
+fine
diff --git a/out/x.txt b/out/x.txt
new file mode 100644
--- /dev/null
+++ b/out/x.txt
@@ -0,0 +1 @@
+planted
"""


def test_a_merge_into_a_symlinked_directory_writes_nothing_anywhere(tmp_path: Path) -> None:
    ws, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    ws.mkdir()
    outside.mkdir()
    (ws / "a.txt").write_text("a\n")
    os.symlink(outside, ws / "out")
    repo = ShadowRepo(ws, home)
    repo.snapshot()
    with pytest.raises(MergeError, match="symlink"):
        isolate.apply(repo, PATCH, tmp_path / "scratch")
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "out"]  # in.txt's staging is gone
    assert not (tmp_path / "scratch" / "merge.json").exists()
