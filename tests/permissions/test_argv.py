"""Commands are argv: an interpolated value is exactly one argument, never shell or command text."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from perm_helpers import PY, cli, statuses

from normalize.intents import parse_command
from normalize.tools.shell import split_words, text_after_verb
from normalize.workflow.argv import bind_command

PRINT_ARGS = "import json, sys\nopen('log.jsonl', 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
NAMES = ["$(touch x).txt", "a b.txt", "it's `id`.txt", "plain.txt"]


def _each_file(shell: bool) -> str:
    return f'''[workflow]
name = "each"
[workflow.permissions]
mode = "auto"
allow = ["*printargs.py*"]
allow_shell = {"true" if shell else "false"}
[[workflow.steps]]
name = "each"
for_each = "files:*.txt"
as = "file"
action = "run {PY} printargs.py {{file}}"
on_error = "continue"
'''


def _logged(root: Path) -> list[list[str]]:
    log = root / "log.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("shell", [True, False], ids=["allow_shell", "no_shell"])
def test_a_file_named_like_a_command_substitution_runs_nothing_else(
        tmp_path: Path, normalize_home: Path, shell: bool) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "printargs.py").write_text(PRINT_ARGS)
    for name in NAMES:
        (root / name).write_text("data\n")
    flow = tmp_path / "each.toml"
    flow.write_text(_each_file(shell))
    proc = cli("run", str(flow), "--json", cwd=root, home=normalize_home)
    assert not (root / "x").exists(), proc.stdout
    assert not (tmp_path / "x").exists()
    logged = _logged(root)
    assert all(len(args) == 1 for args in logged), logged  # one argument per item, always
    if shell:  # each item reached the program as its own literal name
        assert sorted(args[0] for args in logged) == sorted(NAMES)
        assert statuses(proc.stdout) == ["success"] * len(NAMES)
    else:  # without allow_shell, a `$(` or backtick in a word is refused before it runs
        assert sorted(args[0] for args in logged) == ["a b.txt", "plain.txt"]


def test_a_variable_with_spaces_quotes_and_a_newline_is_one_argument(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "printargs.py").write_text(PRINT_ARGS)
    flow = tmp_path / "say.toml"
    flow.write_text(f'''[workflow]
name = "say"
[workflow.vars]
msg = "x"
[workflow.permissions]
mode = "auto"
allow = ["*printargs.py*"]
[[workflow.steps]]
name = "say"
action = "run {PY} printargs.py {{msg}} --flag=\\"{{msg}}\\" '{{msg}}' last"
''')
    message = 'it\'s "quoted"  twice\nand a second line; rm -rf x # not a comment'
    proc = cli("run", str(flow), "--var", f"msg={message}", "--json", cwd=root,
               home=normalize_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _logged(root) == [[message, f"--flag={message}", message, "last"]]


def test_bound_values_are_shell_quoted_in_the_text_and_lists_spread() -> None:
    values = {"files": ["a b.py", "$(x).py"], "name": "o'k $(y)", "body": "line\nEOF\nmore"}
    action = bind_command("run pytest {files} -k {name}", values, parse_command)
    assert action.args == ["pytest", "a b.py", "$(x).py", "-k", "o'k $(y)"]
    rest = text_after_verb(action)
    assert rest is not None and split_words(rest) == action.args
    assert shlex.split(rest) == action.args  # what a shell would see: the same words
    written = bind_command("write out.txt <<EOF\n{body}\nEOF", values, parse_command)
    assert written.args == ["out.txt"] and written.body == "line\nEOF\nmore\n"
    inside = bind_command('run echo "pre {name} post"', values, parse_command)
    assert inside.args == ["echo", "pre o'k $(y) post"]
    assert shlex.split(inside.text.split(None, 1)[1]) == inside.args
