"""`normalize --help` and the README: every command named, no description cut mid-phrase."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from normalize.cli.app import app

README = Path(__file__).resolve().parents[2] / "README.md"


def commands() -> list[str]:
    """Every command and subcommand, as `normalize NAME [SUB]`."""
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    out: list[str] = []
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        subs = getattr(command, "commands", {})
        out.append(f"normalize {name}")
        out.extend(f"normalize {name} {sub}" for sub in subs if name != "help")
    return out


def named(command: str, table: str) -> bool:
    """Whether a row of the table names `normalize NAME [SUB]` (`view …, skeleton PATH` rows
    name the later verbs bare; `workflows list\\|show` names subcommands together)."""
    *_, last = command.split()
    group = " ".join(command.split()[:2])
    return f"`{command}" in table or f"`{last} " in table or \
        re.search(rf"`{re.escape(group)} [^`]*\b{last}\b", table) is not None


def test_the_readme_table_names_every_command_and_completion() -> None:
    text = README.read_text()
    table = text[text.index("## Commands"):text.index("A flag means one thing")]
    missing = [c for c in commands() if not named(c, table)]
    assert missing == []
    assert "`normalize --version" in table and "--install-completion" in text


@pytest.mark.parametrize("group", [[], ["tasks"], ["workflows"], ["sandbox"], ["help"],
                                   ["batch"], ["memory"], ["skills"]])
def test_help_never_cuts_a_description_mid_phrase(group: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "normalize.cli.app", *group, "--help"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = done.stdout[done.stdout.index("Commands:"):]
    assert [line for line in listed.splitlines() if re.search(r"\.\.\.$", line)] == []
