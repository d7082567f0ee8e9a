"""`normalize grep|view` on the command line import only their own tool's modules (fast start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# what other tools need, and grep on ripgrep never does
NOT_FOR_GREP = ("asyncio", "ssl", "pathspec", "tree_sitter", "normalize.tools.mcp",
                "normalize.tools.analyze", "normalize.tools.test", "normalize.tools.run",
                "normalize.tools.view", "normalize.tools.code", "rich")


def loaded_by(argv: list[str], cwd: Path) -> tuple[str, list[str]]:
    code = ("import contextlib, io, sys\n"
            "from normalize.cli.app import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    status = main({argv!r})\n"
            f"print(out.getvalue() + '|' + ' '.join(m for m in {NOT_FOR_GREP!r} "
            "if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, check=True)
    output, _, modules = done.stdout.rpartition("|")
    return output, modules.split()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text("def answer():\n    return 42\n")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    (tmp_path / "ignored.py").write_text("def answer_too():\n    pass\n")
    return tmp_path


def test_grep_imports_no_other_tool(tree: Path) -> None:
    output, modules = loaded_by(["grep", "answer"], tree)
    assert output == "a.py:1: def answer():\n"  # .gitignore honoured all the same
    assert modules == []


def test_view_imports_what_it_needs(tree: Path) -> None:
    output, modules = loaded_by(["view", "a.py"], tree)
    assert "return 42" in output
    assert "normalize.tools.view" in modules
    assert "normalize.tools.mcp" not in modules and "asyncio" not in modules


def test_a_registry_of_named_tools_holds_only_those() -> None:
    from normalize.errors import ConfigError
    from normalize.tools import BUILTIN_TOOLS, default_tools

    assert default_tools(("grep", "view")).names() == ["grep", "view"]
    assert default_tools().names() == sorted(BUILTIN_TOOLS)
    with pytest.raises(ConfigError, match="unknown tool 'nope'"):
        default_tools(("nope",))
