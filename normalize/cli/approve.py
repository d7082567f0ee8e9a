"""The approval prompt: the change shown first (paged when long), then yes / no / always.

Ctrl-C at the prompt stops at once: the signal handler of the run
(`SignalCancel`) cancels it and interrupts the read, the answer is "no", and the
engine stops at its next safe point — nothing typed afterwards lands in a
prompt that is no longer shown.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from normalize.cli.console import Current, Environment, hold_of, line_reader
from normalize.tools.approval import Question

CHOICES = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}
ROOM = 8
"""Lines of the terminal kept for the question and the lines around it."""


def approver(env: Environment, current: Current) -> Callable[[str], str]:
    """Ask a person about an action; the renderer `current()` shows is held while asking."""
    read = line_reader(env)
    hold = hold_of(current)

    def approve(question: str) -> str:
        detail = question.detail if isinstance(question, Question) else ""
        always = f"[a]lways ({question.always})" if isinstance(question, Question) \
            and question.always else "[a]lways"
        lines = detail.splitlines()
        page = max(5, _height(env) - ROOM)
        with hold():
            _show(env, lines[:page] if len(lines) > page + 2 else lines)
            more = len(lines) - page if len(lines) > page + 2 else 0
            while True:
                options = f"[y]es / [n]o / {always}" + (" / [v]iew all" if more else "")
                if more:
                    env.stderr.write(f"  … {more} more lines of the change\n")
                reply = read(f"{question} {options}: ")
                if reply is None:
                    return "no"
                word = reply.strip().lower()
                if more and word in ("v", "view"):
                    _show(env, lines)
                    more = 0
                elif word in CHOICES:
                    return CHOICES[word]

    return approve


def _height(env: Environment) -> int:
    """The terminal's height (LINES, else the terminal's own, else 24)."""
    raw = env.env.get("LINES", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return shutil.get_terminal_size((80, 24)).lines


def _show(env: Environment, lines: list[str]) -> None:
    """The diff lines, coloured at a terminal that takes colour."""
    colour = env.stderr_tty and "NO_COLOR" not in env.env and env.env.get("TERM") != "dumb"
    for line in lines:
        env.stderr.write(f"  {_coloured(line) if colour else line}\n")
    env.stderr.flush()


def _coloured(line: str) -> str:
    if line.startswith(("+++", "---")):
        return f"\x1b[1m{line}\x1b[0m"
    code = {"+": "32", "-": "31", "@": "36"}.get(line[:1])
    return f"\x1b[{code}m{line}\x1b[0m" if code else line
