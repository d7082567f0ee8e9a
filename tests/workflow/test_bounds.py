"""Malformed workflows past the parser's reach: exit 2 and one line naming the file and place.

Each case is written to a temporary directory and given to the real CLI twice,
`normalize run FILE` and `normalize workflows validate FILE`: both must exit 2
with one line on stderr (the file, its line and column where it has them, the
message) and no traceback. The bounds are `normalize.workflow.bounds`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import cli

from normalize.workflow.bounds import MAX_FILE_BYTES, MAX_NESTED_DEPTH, MAX_NESTED_FILES

STEP = '[[workflow.steps]]\nname = "s"\naction = "note hi"\n'
HEAD = '[workflow]\nname = "w"\n[workflow.vars]\n'


def _deep_arrays(d: Path) -> tuple[Path, str]:
    path = d / "deep.toml"
    path.write_text(HEAD + "x = " + "[" * 1000 + "]" * 1000 + "\n" + STEP)
    return path, f"{path}:4:{5 + 64}: values nested more than 64 deep"


def _deep_tables(d: Path) -> tuple[Path, str]:
    path = d / "tables.toml"
    path.write_text(HEAD + "x = " + "{a = " * 400 + "1" + "}" * 400 + "\n" + STEP)
    return path, f"{path}:4:{5 + 64 * 5}: values nested more than 64 deep"


def _brackets_in_strings(d: Path) -> tuple[Path, str]:
    """Brackets in strings and comments do not count; the one too deep is found past them."""
    path = d / "quoted.toml"
    path.write_text(HEAD + 'q = "' + "[" * 100 + '"  # ' + "{" * 100 + "\n" + "r = '\\'\n"
                    + "x = " + "[" * 70 + "]" * 70 + "\n" + STEP)
    return path, f"{path}:6:{5 + 64}: values nested more than 64 deep"


def _dotted_key(d: Path) -> tuple[Path, str]:
    path = d / "dotted.toml"
    path.write_text(HEAD + "x." + ".".join(["a"] * 200) + " = 1\n" + STEP)
    return path, f"{path}:4:1: values nested more than 64 deep"


def _duplicate_vars(d: Path) -> tuple[Path, str]:
    path = d / "dup.toml"
    path.write_text(HEAD + 'a = "1"\n[workflow.vars]\nb = "2"\n' + STEP)
    return path, f"{path}:5:15: invalid TOML: Cannot declare ('workflow', 'vars') twice"


def _nested_chain(d: Path) -> tuple[Path, str]:
    for i in range(400):
        body = f'[[workflow.steps]]\nname = "s"\nworkflow = "w{i + 1}.toml"\n' if i < 399 \
            else STEP
        (d / f"w{i}.toml").write_text(f'[workflow]\nname = "w{i}"\n{body}')
    last = MAX_NESTED_DEPTH
    return d / "w0.toml", (f"{d / f'w{last}.toml'}:5:1: nested workflows go more than {last} "
                           f"files deep: w0.toml → w1.toml → w2.toml → … → w{last}.toml → "
                           f"w{last + 1}.toml")


def _nested_cycle(d: Path) -> tuple[Path, str]:
    for name, other in (("a", "b"), ("b", "c"), ("c", "a")):
        (d / f"{name}.toml").write_text(f'[workflow]\nname = "{name}"\n[[workflow.steps]]\n'
                                        f'name = "s"\nworkflow = "{other}.toml"\n')
    return d / "a.toml", (f"{d / 'c.toml'}:5:1: nested workflows form a cycle: "
                          f"a.toml → b.toml → c.toml → a.toml")


def _nested_fan(d: Path) -> tuple[Path, str]:
    """Two steps each nesting the next file: 2**12 inclusions if nothing bounded them."""
    for i in range(13):
        body = "".join(f'[[workflow.steps]]\nname = "{s}"\nworkflow = "f{i + 1}.toml"\n'
                       for s in "ab") if i < 12 else STEP
        (d / f"f{i}.toml").write_text(f'[workflow]\nname = "f{i}"\n{body}')
    return d / "f0.toml", (f"{d / 'f10.toml'}:8:1: more than {MAX_NESTED_FILES} nested "
                           f"workflow files in all (each inclusion counts)")


def _nul_in_string(d: Path) -> tuple[Path, str]:
    path = d / "nul.toml"
    path.write_bytes(b'[workflow]\nname = "n\x00ul"\n' + STEP.encode())
    return path, f"{path}:2:10: invalid TOML: Illegal character '\\x00'"


def _nul_in_comment(d: Path) -> tuple[Path, str]:
    path = d / "nulc.toml"
    path.write_bytes(b'[workflow]\nname = "n" # a \x00 here\n' + STEP.encode())
    return path, f"{path}:2:"


def _bad_utf8(d: Path) -> tuple[Path, str]:
    path = d / "latin1.toml"
    path.write_bytes('[workflow]\nname = "café"\n'.encode("latin-1") + STEP.encode())
    return path, f"{path}:2:12: not UTF-8 (byte 0xe9: invalid continuation byte)"


def _huge_string(d: Path) -> tuple[Path, str]:
    path = d / "long.toml"
    path.write_text(f'[workflow]\nname = "long"\ndescription = "{"a" * (2 << 20)}"\n{STEP}')
    return path, (f"{path}:3:1: a string of {2 << 20:,} characters; at most 1,048,576 are "
                  f"allowed")


def _huge_file(d: Path) -> tuple[Path, str]:
    path = d / "huge.toml"
    with path.open("w") as out:
        out.write('[workflow]\nname = "huge"\n' + STEP)
        line = "# " + "x" * 1000 + "\n"
        out.write(line * (MAX_FILE_BYTES // len(line) + 1))
    return path, f"{path}: larger than 16 MiB, the most a workflow file may be"


CASES: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "deep_arrays": _deep_arrays, "deep_inline_tables": _deep_tables,
    "brackets_in_strings": _brackets_in_strings, "dotted_key": _dotted_key,
    "duplicate_vars_table": _duplicate_vars, "chain_of_400": _nested_chain,
    "cycle": _nested_cycle, "fan_out": _nested_fan, "nul_in_string": _nul_in_string,
    "nul_in_comment": _nul_in_comment, "bad_utf8": _bad_utf8, "huge_string": _huge_string,
    "huge_file": _huge_file,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_workflow_is_one_line_at_its_place_and_exit_2(
        case: str, tmp_path: Path, normalize_home: Path) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    path, message = CASES[case](folder)
    for args, prefix in ((("run", str(path)), "normalize: error: "),
                         (("workflows", "validate", str(path)), "")):
        proc = cli(*args, cwd=tmp_path, home=normalize_home, env={"CI": "true"})
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, (args, proc.stderr)
        assert lines[0].startswith(prefix + message), (args, lines[0])
        assert proc.stdout == ""
    tasks = normalize_home / "tasks"
    assert not tasks.exists() or not any(tasks.glob("*.json"))  # nothing ran
