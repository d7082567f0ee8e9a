"""The `edit` and `write` tools, run through the registry as a driver would run them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from normalize.fsutil import atomic_write
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.approval import ApprovalMode, ApprovalPolicy
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.edit import EditTool, WriteTool
from normalize.tools.guard import WorkspaceGuard

try:
    from normalize.execution.cache import NoCache
except ImportError:  # the cache lands separately; a preview-less double is enough here

    class NoCache:  # type: ignore[no-redef]
        def preview(self, content: str) -> tuple[str, str | None]:
            return content, None


CALC = 'def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return add(xs[0], "1") / len(xs)\n'

REGISTRY = ToolRegistry([EditTool(), WriteTool()])


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    policy = ApprovalPolicy(mode=ApprovalMode.YES)
    return ToolContext(workspace=ws, guard=WorkspaceGuard(ws), cache=NoCache(), policy=policy)


def edit(ctx: ToolContext, target: str, body: str | None) -> ActionResult:
    params: dict[str, object] = {"args": [target]}
    if body is not None:
        params["body"] = body
    return REGISTRY.execute(Action("edit", params, text=f"edit {target}"), ctx)


def write(ctx: ToolContext, target: str, body: str | None) -> ActionResult:
    params: dict[str, object] = {"args": [target]}
    if body is not None:
        params["body"] = body
    return REGISTRY.execute(Action("write", params, text=f"write {target}"), ctx)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- SEARCH/REPLACE --------------------------------------------------------------------------


def test_search_replace_answers_with_a_unified_diff(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    result = edit(
        ctx,
        "calc.py",
        block('    return add(xs[0], "1") / len(xs)', "    return add(xs[0], 1) / len(xs)"),
    )
    assert result.ok, result.error
    assert (ws / "calc.py").read_text() == CALC.replace('"1"', "1")
    assert result.output == (
        "--- a/calc.py\n"
        "+++ b/calc.py\n"
        "@@ -3,4 +3,4 @@\n"
        " \n"
        " \n"
        " def mean(xs):\n"
        '-    return add(xs[0], "1") / len(xs)\n'
        "+    return add(xs[0], 1) / len(xs)"
    )
    assert result.data == {"path": "calc.py", "added": 1, "removed": 1}


def test_search_matching_twice_names_both_lines_and_changes_nothing(
    ctx: ToolContext, ws: Path
) -> None:
    (ws / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    before = (ws / "dup.py").read_bytes()
    result = edit(ctx, "dup.py", block("x = 1", "x = 3"))
    assert result.status is ResultStatus.ERROR
    assert "2 times (lines 1, 3)" in (result.error or "")
    assert (ws / "dup.py").read_bytes() == before


def test_search_matching_nothing_quotes_the_closest_lines(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    before = (ws / "calc.py").read_bytes()
    result = edit(ctx, "calc.py", block("    return add(xs[0], '1') / len(xs)", "    pass"))
    assert result.status is ResultStatus.ERROR
    error = result.error or ""
    assert "does not match calc.py" in error
    assert '  6 |     return add(xs[0], "1") / len(xs)' in error
    assert "edit calc.py:6-6" in error
    assert (ws / "calc.py").read_bytes() == before


def test_blocks_apply_in_order_or_not_at_all(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    before = (ws / "calc.py").read_bytes()
    good = block("def add(a, b):", "def add(a: int, b: int) -> int:")
    bad = block("def median(xs):", "def median(xs: list[int]):")
    result = edit(ctx, "calc.py", good + "\n" + bad)
    assert result.status is ResultStatus.ERROR
    assert "SEARCH block 2 of 2" in (result.error or "")
    assert (ws / "calc.py").read_bytes() == before

    # A later block may build on an earlier one; both land in one write.
    chained = block("def add(a, b):", "def plus(a, b):") + block(
        "def plus(a, b):", "def sum2(a, b):"
    )
    result = edit(ctx, "calc.py", chained)
    assert result.ok, result.error
    assert (ws / "calc.py").read_text().startswith("def sum2(a, b):\n")


def test_whitespace_only_differences_are_forgiven_and_reported(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    result = edit(
        ctx,
        "calc.py",
        block(
            'return add(xs[0], "1") / len(xs)   ', "total = add(xs[0], 1)\nreturn total / len(xs)"
        ),
    )
    assert result.ok, result.error
    assert "whitespace" in result.output.splitlines()[0]
    assert (
        (ws / "calc.py")
        .read_text()
        .endswith("def mean(xs):\n    total = add(xs[0], 1)\n    return total / len(xs)\n")
    )


def test_whitespace_relaxed_match_must_be_unique(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.py").write_text("if x:\n    go()\nelse:\n        go()\n")
    before = (ws / "a.py").read_bytes()
    result = edit(ctx, "a.py", block("go()", "stop()"))
    assert result.status is ResultStatus.ERROR
    assert "(lines 2, 4)" in (result.error or "")
    assert (ws / "a.py").read_bytes() == before


def test_edit_without_blocks_or_body_says_how(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    no_body = edit(ctx, "calc.py", None)
    assert no_body.status is ResultStatus.ERROR
    assert "usage: `edit PATH <<EOF`" in (no_body.error or "")
    assert "\n" not in (no_body.error or "")
    no_blocks = edit(ctx, "calc.py", "x = 1\n")
    assert "write calc.py" in (no_blocks.error or "")
    unclosed = edit(ctx, "calc.py", "<<<<<<< SEARCH\nx\n=======\ny\n")
    assert "not closed" in (unclosed.error or "")
    missing = edit(ctx, "nope.py", block("a", "b"))
    assert "no such file: nope.py" in (missing.error or "")


# -- line ranges and symbols -----------------------------------------------------------------


def test_line_range_is_replaced_inclusively(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("one\ntwo\nthree\nfour\n")
    result = edit(ctx, "f.txt:2-3", "TWO\nTHREE\nTHREE AND A HALF\n")
    assert result.ok, result.error
    assert (ws / "f.txt").read_text() == "one\nTWO\nTHREE\nTHREE AND A HALF\nfour\n"
    assert result.data == {"path": "f.txt", "added": 3, "removed": 2}
    past = edit(ctx, "f.txt:4-9", "x\n")
    assert "has 5 lines" in (past.error or "")


def test_python_symbols_are_replaced_and_reindented(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(
        "class Stack:\n"
        "    def push(self, x):\n"
        "        self.items.append(x)\n"
        "\n"
        "    def pop(self):\n"
        "        return self.items.pop()\n"
        "\n"
        "\n"
        "def mean(xs):\n"
        "    return sum(xs) / 0\n"
    )
    result = edit(ctx, "calc.py/mean", "def mean(xs):\n    return sum(xs) / len(xs)\n")
    assert result.ok, result.error
    # The body comes unindented; the method keeps its place in the class.
    result = edit(ctx, "calc.py/Stack/push", "def push(self, x):\n    self.items.insert(0, x)\n")
    assert result.ok, result.error
    assert (ws / "calc.py").read_text() == (
        "class Stack:\n"
        "    def push(self, x):\n"
        "        self.items.insert(0, x)\n"
        "\n"
        "    def pop(self):\n"
        "        return self.items.pop()\n"
        "\n"
        "\n"
        "def mean(xs):\n"
        "    return sum(xs) / len(xs)\n"
    )
    missing = edit(ctx, "calc.py/Stack/psh", "def psh(self): ...\n")
    assert "no symbol 'Stack/psh'" in (missing.error or "")
    assert "Stack/push" in (missing.error or "")


def test_javascript_symbol_is_replaced(ctx: ToolContext, ws: Path) -> None:
    (ws / "web").mkdir()
    (ws / "web" / "m.js").write_text(
        "function add(a, b) {\n  return a - b;\n}\n\nexport const x = add(1, 2);\n"
    )
    result = edit(ctx, "web/m.js/add", "function add(a, b) {\n  return a + b;\n}\n")
    assert result.ok, result.error
    assert (ws / "web" / "m.js").read_text() == (
        "function add(a, b) {\n  return a + b;\n}\n\nexport const x = add(1, 2);\n"
    )
    assert result.data == {"path": "web/m.js", "added": 1, "removed": 1}


# -- bytes on disk ---------------------------------------------------------------------------


def test_crlf_file_stays_crlf(ctx: ToolContext, ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    result = edit(ctx, "win.txt", block("beta", "BETA\nbeta two"))
    assert result.ok, result.error
    assert (ws / "win.txt").read_bytes() == b"alpha\r\nBETA\r\nbeta two\r\ngamma\r\n"


def test_utf8_bom_is_kept(ctx: ToolContext, ws: Path) -> None:
    (ws / "bom.py").write_bytes(b"\xef\xbb\xbfname = 'caf\xc3\xa9'\n")
    result = edit(ctx, "bom.py", block("name = 'café'", "name = 'thé'"))
    assert result.ok, result.error
    assert (ws / "bom.py").read_bytes() == "\ufeffname = 'thé'\n".encode()


def test_latin1_file_round_trips(ctx: ToolContext, ws: Path) -> None:
    (ws / "old.txt").write_bytes(b"caf\xe9\nprice: 10\n\xa9 1999\n")
    result = edit(ctx, "old.txt", block("price: 10", "price: 12"))
    assert result.ok, result.error
    assert (ws / "old.txt").read_bytes() == b"caf\xe9\nprice: 12\n\xa9 1999\n"
    euro = edit(ctx, "old.txt", block("price: 12", "price: 12 €"))
    assert "latin-1" in (euro.error or "")
    assert (ws / "old.txt").read_bytes() == b"caf\xe9\nprice: 12\n\xa9 1999\n"


def test_missing_trailing_newline_stays_missing(ctx: ToolContext, ws: Path) -> None:
    (ws / "n.txt").write_text("a\nb")
    result = edit(ctx, "n.txt", block("b", "c"))
    assert result.ok, result.error
    assert (ws / "n.txt").read_text() == "a\nc"
    assert "\\ No newline at end of file" in result.output


def test_file_mode_is_kept(ctx: ToolContext, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o754)
    assert edit(ctx, "run.sh", block("echo hi", "echo hello")).ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o754
    assert write(ctx, "run.sh", "#!/bin/sh\necho bye\n").ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o754


# -- write -----------------------------------------------------------------------------------


def test_write_creates_parents_and_then_overwrites(ctx: ToolContext, ws: Path) -> None:
    created = write(ctx, "docs/notes/todo.md", "# Todo\n- ship\n")
    assert created.ok, created.error
    assert (ws / "docs" / "notes" / "todo.md").read_text() == "# Todo\n- ship\n"
    assert created.output.splitlines()[:3] == [
        "created docs/notes/todo.md (+2 -0)",
        "--- /dev/null",
        "+++ b/docs/notes/todo.md",
    ]
    assert created.data == {"path": "docs/notes/todo.md", "added": 2, "removed": 0, "created": True}

    overwritten = write(ctx, "docs/notes/todo.md", "# Todo\n- test")
    assert overwritten.ok
    assert overwritten.output.startswith("overwrote docs/notes/todo.md (+1 -1)\n--- a/docs")
    assert overwritten.data["created"] is False
    assert (ws / "docs" / "notes" / "todo.md").read_text() == "# Todo\n- test\n"
    assert "usage: `write PATH <<EOF`" in (write(ctx, "x.txt", None).error or "")


def test_write_into_git_is_blocked_and_writes_nothing(ctx: ToolContext, ws: Path) -> None:
    before = (ws / ".git" / "config").read_bytes()
    result = write(ctx, ".git/config", "[core]\n\thooksPath = /tmp/evil\n")
    assert result.status is ResultStatus.BLOCKED
    assert ".git/" in (result.error or "")
    assert (ws / ".git" / "config").read_bytes() == before
    assert edit(ctx, ".git/config", block("[core]", "[x]")).status is ResultStatus.BLOCKED
    escape = write(ctx, "../outside.txt", "x\n")
    assert escape.status is ResultStatus.BLOCKED
    assert not (ws.parent / "outside.txt").exists()


@pytest.mark.parametrize("name", ["-rf", "a;b $(x).txt"])
def test_odd_file_names_are_plain_names(ctx: ToolContext, ws: Path, name: str) -> None:
    assert write(ctx, name, "first\n").ok
    assert (ws / name).read_text() == "first\n"
    assert edit(ctx, name, block("first", "second")).ok
    assert (ws / name).read_text() == "second\n"
    assert sorted(p.name for p in ws.iterdir()) == sorted([".git", name])


# -- atomic writes ---------------------------------------------------------------------------


def test_atomic_write_leaves_no_temp_files(ctx: ToolContext, ws: Path) -> None:
    (ws / "calc.py").write_text(CALC)
    assert edit(ctx, "calc.py", block("def add(a, b):", "def add(a, b, c=0):")).ok
    assert write(ctx, "new.txt", "hello\n").ok
    assert leftovers(ws) == []


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "data.json"
    target.write_bytes(b"old")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


def test_atomic_write_modes_and_symlinks(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.txt"
    atomic_write(fresh, b"x", mode=0o600)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    real = tmp_path / "real.txt"
    real.write_bytes(b"a")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write(link, b"b", fsync=False)
    assert link.is_symlink()
    assert real.read_bytes() == b"b"
