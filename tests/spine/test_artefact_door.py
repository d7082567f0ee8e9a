"""The door out is pinned: every writer of an artefact writes through `normalize.artefacts`.

An `ast` walk finds the writers of artefacts in every module under `normalize/`:
a function is one when it names an artefact (`ARTEFACT_NAMES`: the files
`batch collect`, the Action and the report make, the Action's output files)
or makes a commit from a message (`"commit"` with `-F` or `-m`). Inside a
writer, a raw write (`SINKS`: `write_text`, `open(..., "w")`, `csv.writer`,
`fsopen.place`, …) fails, unless what it writes is what the door returned
(an argument that is a call into `artefacts`). An upload (fsspec's
`pipe_file`, `pipe`, `put_file`) anywhere but the door fails too: the
store's uploads go through `artefacts.upload`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import normalize

PACKAGE = Path(normalize.__file__).resolve().parent
DOOR = PACKAGE / "artefacts.py"

ARTEFACT_NAMES = frozenset({
    "results.jsonl", "results.csv", "events.jsonl", "normalize.log", "commit.json",
    "report.html", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV",
})
COMMIT_FLAGS = frozenset({"-F", "-m", "--file", "--message"})
SINKS = frozenset({"write_text", "write_bytes", "writerow", "writerows", "writer", "place",
                   "atomic_write_bytes", "pipe_file", "pipe", "put_file", "fdopen"})
UPLOADS = frozenset({"pipe_file", "pipe", "put_file"})
WRITE_MODES = frozenset("wax+")

# the writers the walk must find (a marker that vanished would hide one)
KNOWN_WRITERS = {
    "batch/watch.py:collect", "cli/action.py:main", "cli/action.py:_commit",
    "checkpoints/commit.py:_commit_in_worktree", "checkpoints/reportfile.py:save_report",
}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _through_door(node: ast.Call) -> bool:
    """Whether `node` is the door (`artefacts.X(...)`), or an argument of it is what the
    door returned."""
    for arg in [node, *node.args, *(k.value for k in node.keywords)]:
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                isinstance(arg.func.value, ast.Name) and arg.func.value.id == "artefacts":
            return True
    return False


def _opens_for_writing(node: ast.Call) -> bool:
    if _name(node.func) != "open":
        return False
    modes = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    modes += [k.value for k in node.keywords if k.arg == "mode"
              and isinstance(k.value, ast.Constant)]
    for mode in modes:
        assert isinstance(mode, ast.Constant)
        if isinstance(mode.value, str) and WRITE_MODES & set(mode.value):
            return True
    return any(isinstance(a, ast.Attribute) and a.attr.startswith("O_WR") for a in
               ast.walk(node))  # os.open(path, os.O_WRONLY | …)


def raw_writes(func: ast.AST) -> list[int]:
    """The lines of `func` that write around the door."""
    lines = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Call) or _through_door(node):
            continue
        if _name(node.func) in SINKS or _opens_for_writing(node):
            lines.append(node.lineno)
    return lines


def is_writer(func: ast.AST) -> bool:
    """Whether `func` names an artefact or commits from a message."""
    strings = {n.value for n in ast.walk(func)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return bool(strings & ARTEFACT_NAMES) or ("commit" in strings and bool(strings &
                                                                           COMMIT_FLAGS))


def violations(source: str, where: str) -> tuple[set[str], list[str]]:
    """The writers of artefacts in `source` (`where:function`), and what goes around the door."""
    tree = ast.parse(source)
    writers: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and is_writer(node):
            writers.add(f"{where}:{node.name}")
            found += [f"{where}:{line} ({node.name}) writes an artefact around the door"
                      for line in raw_writes(node)]
        if isinstance(node, ast.Call) and _name(node.func) in UPLOADS and \
                not (isinstance(node.func, ast.Attribute) and
                     isinstance(node.func.value, ast.Name) and node.func.value.id == "os"):
            found.append(f"{where}:{node.lineno} uploads around the door")
    return writers, found


def walk_package() -> tuple[set[str], list[str]]:
    writers: set[str] = set()
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DOOR:
            continue
        some, bad = violations(path.read_text(), str(path.relative_to(PACKAGE)))
        writers |= some
        found += bad
    return writers, found


def test_every_writer_of_an_artefact_writes_through_the_door() -> None:
    writers, found = walk_package()
    assert KNOWN_WRITERS <= writers, f"writers no longer found: {KNOWN_WRITERS - writers}"
    assert found == []


def test_a_planted_write_around_the_door_fails() -> None:
    source = (PACKAGE / "batch" / "watch.py").read_text()
    door = 'artefacts.write_jsonl(out / "results.jsonl", records)'
    assert door in source
    planted = source.replace(door, '(out / "results.jsonl").write_text(str(records))')
    _, found = violations(planted, "batch/watch.py")
    assert len(found) == 1 and "(collect) writes an artefact around the door" in found[0]


def test_a_planted_upload_and_a_raw_commit_message_fail() -> None:
    remote = (PACKAGE / "store" / "remote.py").read_text()
    door = "artefacts.upload(self.fs, self._path(rel), rel, data, redactor or self.redactor)"
    assert door in remote
    _, found = violations(remote.replace(door, "self.fs.pipe_file(self._path(rel), data)"),
                          "store/remote.py")
    assert any("uploads around the door" in line for line in found)
    commit = (PACKAGE / "checkpoints" / "commit.py").read_text()
    door = 'artefacts.write_text(tmp / "MSG", message, redactor)'
    assert door in commit
    _, found = violations(commit.replace(door, '(tmp / "MSG").write_text(message)'),
                          "checkpoints/commit.py")
    assert any("(_commit_in_worktree)" in line for line in found)


# The door in: what a store lists is written only by `RemoteStore.fetch`, after `layout_key`.
PULLERS = ("store/remote.py", "batch/publish.py")


def pulls_around_the_door(source: str, where: str) -> list[str]:
    """Local writes in a puller that do not go through a checked `fsopen.place`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        calls = {_name(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        for line in raw_writes(node):
            call = next(n for n in ast.walk(node) if isinstance(n, ast.Call)
                        and n.lineno == line)
            if _name(call.func) == "place" and "layout_key" in calls:
                continue
            if _name(call.func) in UPLOADS or _through_door(call):
                continue
            found.append(f"{where}:{line} ({node.name}) writes pulled data around the door")
    return found


def test_pulled_files_are_written_only_after_the_layout_check() -> None:
    found = []
    for rel in PULLERS:
        found += pulls_around_the_door((PACKAGE / rel).read_text(), rel)
    assert found == []
    source = (PACKAGE / "store" / "remote.py").read_text()
    check = "data = self.get(layout_key(rel, self.url))"
    assert check in source
    planted = pulls_around_the_door(source.replace(check, "data = self.get(rel)"),
                                    "store/remote.py")
    assert planted and "(fetch)" in planted[0]


def test_a_cell_a_spreadsheet_would_run_is_made_inert_and_a_number_is_not() -> None:
    from normalize.artefacts import neutral_cell

    for cell in ("=1+1", "+A1", "-2+3+cmd|' /C calc'!A0", "@SUM(A1)", "\tx", "\rx", "\uff1dx"):
        assert neutral_cell(cell) == "'" + cell
    for cell in ("-3", "+4.5e3", "plain", "", "1-2"):
        assert neutral_cell(cell) == cell


def test_a_line_writer_redacts_each_line_and_keeps_what_came_so_far(tmp_path: Path) -> None:
    from normalize.artefacts import LineWriter

    token = "ghp_" + "a1B2" * 9
    with LineWriter(tmp_path / "events.jsonl") as events, \
            LineWriter(tmp_path / "normalize.log") as log:
        events.write(f'{{"type": "x", "summary": "v1.{token}"}}\n'.encode())
        log.write(f"error: bad key id_{token}\n".encode())
        assert (tmp_path / "normalize.log").read_text() == "error: bad key id_[REDACTED]\n"
    shown = (tmp_path / "events.jsonl").read_text()
    assert shown == '{"type": "x", "summary": "v1.[REDACTED]"}\n'
