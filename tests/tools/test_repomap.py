"""The repo map: definitions ranked by the files that use them, fitted to a token budget."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from normalize.tools.code.repomap import CHARS_PER_TOKEN, build_map, render
from normalize.tools.files import walk

pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")
REPO = Path(__file__).resolve().parents[2]
MAIN = "import sys; from normalize.cli.app import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """`Engine` is used by three files, `format_report` by one, `Widget` (TS) only by TS."""
    files = {
        "core.py": "class Engine:\n    def step_once(self) -> None:\n        pass\n\n\n"
                   "def _private_helper() -> None:\n    pass\n",
        "report.py": "def format_report(engine):\n    return str(engine)\n",
        "cli.py": "from core import Engine\nfrom report import format_report\n\n\n"
                  "def main():\n    engine = Engine()\n    engine.step_once()\n"
                  "    print(format_report(engine))\n",
        "runner.py": "from core import Engine\n\n\ndef run():\n    Engine().step_once()\n",
        "worker.py": "from core import Engine\n\n\ndef work():\n    return Engine\n",
        "ui/widget.ts": "export class Widget {\n  draw(): void {}\n}\n",
        "ui/app.ts": "import { Widget } from './widget';\nexport function start(): Widget {\n"
                     "  return new Widget();\n}\n",
        "notes.md": "Engine Engine Engine Widget\n",
    }  # fmt: skip
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_most_used_definition_ranks_first(project: Path) -> None:
    repo_map = build_map(project, walk(project), tokens=1000)
    names = [d.row.symbol.name for d in repo_map.ranked]
    assert names[0] == "Engine"
    assert names.index("format_report") < names.index("main")
    assert names.index("Widget") < names.index("start")  # TS files rank among themselves
    assert names.index("_private_helper") > names.index("format_report")
    assert repo_map.text.splitlines()[:2] == ["core.py:", "  1-3  class Engine:"]


def test_the_map_fits_its_budget_and_keeps_a_methods_class(project: Path) -> None:
    full = build_map(project, walk(project), tokens=10_000)
    assert len(full.shown) == len(full.ranked)
    for budget in (5, 12, 20, 40):
        small = build_map(project, walk(project), tokens=budget)
        assert small.tokens <= budget
        assert len(small.text) <= budget * CHARS_PER_TOKEN
        assert len(small.shown) < len(full.shown)
    step = next(d for d in full.ranked if d.row.symbol.name == "step_once")
    rows_by_file = {d.path: [] for d in full.ranked}
    for d in full.ranked:
        rows_by_file[d.path].append(d.row)
    for rows in rows_by_file.values():
        rows.sort(key=lambda r: r.symbol.line)
    alone = render([replace(step, index=rows_by_file["core.py"].index(step.row))], rows_by_file)
    assert alone.splitlines() == [  # a method is shown under its class
        "core.py:", "  1-3  class Engine:", "  2-3    def step_once(self) -> None:"
    ]


def test_python_names_do_not_rank_typescript_files(project: Path) -> None:
    (project / "more.py").write_text("def draw_all(widget):\n    Widget = 1\n", encoding="utf-8")
    ranked = build_map(project, walk(project), tokens=1000).ranked
    widget = next(d for d in ranked if d.row.symbol.name == "Widget")
    alone = build_map(project, [p for p in walk(project) if p.name != "more.py"], tokens=1000)
    assert widget.rank == pytest.approx(
        next(d for d in alone.ranked if d.row.symbol.name == "Widget").rank, rel=0.2
    )


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", MAIN, "map", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_the_command_line(project: Path) -> None:
    shown = cli("--tokens", "30", cwd=project)
    assert shown.returncode == 0, shown.stderr
    head, *body = shown.stdout.splitlines()
    assert head.startswith("# repo map of .: ") and "--tokens N for the other " in head
    assert body[:2] == ["core.py:", "  1-3  class Engine:"]
    data = json.loads(cli("--tokens", "30", "--json", cwd=project).stdout)
    assert data["tokens"] <= 30 and data["definitions"][0]["name"] == "Engine"
    assert data["definitions"][0] == {
        "path": "core.py", "name": "Engine", "kind": "class", "parent": "", "start": 1, "end": 3,
        "signature": "class Engine:", "rank": data["definitions"][0]["rank"],
    }  # fmt: skip
    (project / "huge.py").write_text("x = 1\n" * 200_000, encoding="utf-8")
    skipped = cli(cwd=project).stdout.splitlines()
    assert skipped[-1] == "(not mapped, over 1 MB: huge.py)"  # never silently
    bad = cli("--tokens", "0", cwd=project)
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("--tokens needs a positive number, not 0")
    outside = cli("..", cwd=project)
    assert outside.returncode == 2 and "outside the workspace" in outside.stderr


def test_this_repository(tmp_path: Path) -> None:
    repo_map = build_map(REPO, walk(REPO, REPO / "normalize"), tokens=1024)
    assert repo_map.tokens <= 1024 and repo_map.files > 100
    top = [d.row.symbol.name for d in repo_map.ranked[:40]]
    assert {"Task", "ActionResult", "NormalizeError"} <= set(top), top


@pytest.fixture
def attrs_like(tmp_path: Path) -> Path:
    """A library shaped like attrs: decorators every test uses, a version, exceptions, stubs."""
    make = "class Attribute:\n    pass\n\n\ndef attrs(cls=None):\n    return cls\n\n\n" \
           "def attrib(default=None):\n    return default\n"
    files = {
        "attr/_make.py": make,
        "attr/_make.pyi": "class Attribute: ...\ndef attrs(cls=None): ...\n"
                          "def attrib(default=None): ...\n",
        "attr/_next_gen.py": "from ._make import attrs, attrib\n\n\ndef define(cls=None):\n"
                             "    return attrs(cls)\n\n\ndef field(default=None):\n"
                             "    return attrib(default)\n",
        "attr/_version_info.py": "class VersionInfo:\n    pass\n",
        "attr/_version_info.pyi": "class VersionInfo: ...\n",
        "attr/exceptions.py": "class FrozenInstanceError(AttributeError):\n    pass\n\n\n"
                              "class NotAnAttrsClassError(ValueError):\n    pass\n",
        "attr/__init__.py": "from ._make import Attribute, attrs, attrib\n"
                            "from ._next_gen import define, field\n"
                            "from ._version_info import VersionInfo\n"
                            "from .exceptions import FrozenInstanceError, NotAnAttrsClassError\n"
                            "__version_info__ = VersionInfo()\n",
    }  # fmt: skip
    for number in range(6):
        files[f"tests/test_{number}.py"] = (
            "import pytest\nfrom attr import define, field\nfrom attr.exceptions import "
            "FrozenInstanceError\n\n\n@define\nclass C:\n    x = field()\n\n\n"
            "def test_frozen():\n    with pytest.raises(FrozenInstanceError):\n        C().x = 1\n")
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_decorators_everyone_uses_rank_above_versions_and_exceptions(attrs_like: Path) -> None:
    repo_map = build_map(attrs_like, walk(attrs_like), tokens=1000)
    names = [d.row.symbol.name for d in repo_map.ranked]
    decorators = {"define", "field", "attrs", "attrib"}
    assert set(names[:4]) == decorators, names  # above VersionInfo and the exception classes


def test_a_stub_beside_its_module_is_left_out(attrs_like: Path) -> None:
    paths = {d.path for d in build_map(attrs_like, walk(attrs_like), tokens=1000).ranked}
    assert "attr/_make.py" in paths and "attr/_version_info.py" in paths
    assert not {p for p in paths if p.endswith(".pyi")}
    (attrs_like / "attr" / "_make.py").unlink()  # a stub alone is the only outline there is
    paths = {d.path for d in build_map(attrs_like, walk(attrs_like), tokens=1000).ranked}
    assert "attr/_make.pyi" in paths


def test_the_head_says_what_is_left(attrs_like: Path) -> None:
    head = cli("--tokens", "8", cwd=attrs_like).stdout.splitlines()[0]
    assert head.endswith(" definitions"), head
    assert "--tokens N for the other " in head
