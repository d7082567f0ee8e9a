"""A workflow step's command with its `{var}` values bound as arguments, never re-parsed.

Pasting a value into the command text and parsing the result lets the value
pick its own words: a file named `a b.txt` becomes two arguments, `$(touch x)`
reaches a shell, a newline starts a new command. Instead each `{name}` is
first replaced by a mark, the marked text is parsed, and then each mark in the
parsed words (and body) is replaced by its value. A word that is exactly one
mark of a list value becomes one argument per item. The action's `text` shows
each value quoted for the shell (`shlex.quote`), so with `allow_shell` a value
is never shell syntax either.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from normalize.task import Action
from normalize.workflow.interpolate import lookup_value

__all__ = ["bind_command"]

_VAR = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
_MARK = re.compile("\ue000(\\d+)\ue001")


def _mark(index: int) -> str:
    return f"\ue000{index}\ue001"


def _marked(text: str, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """`text` with a mark for each `{name}`, and the values the marks stand for."""
    found: list[Any] = []

    def sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        found.append(lookup_value(match.group(1), values))
        return _mark(len(found) - 1)

    return _VAR.sub(sub, text), found


def _text(value: Any) -> str:
    if isinstance(value, list):
        sep = "\n" if any("\n" in str(v) for v in value) else " "
        return sep.join(str(v) for v in value)
    return str(value)


def _unmark(text: str, found: list[Any]) -> str:
    return _MARK.sub(lambda m: _text(found[int(m.group(1))]), text)


def _words(word: str, found: list[Any]) -> list[str]:
    whole = _MARK.fullmatch(word)
    if whole is not None and isinstance(found[int(whole.group(1))], list):
        return [str(item) for item in found[int(whole.group(1))]]
    return [_unmark(word, found)]


def _bind(value: Any, found: list[Any]) -> Any:
    if isinstance(value, str):
        return _unmark(value, found)
    if isinstance(value, list):
        return [word for item in value for word in (
            _words(item, found) if isinstance(item, str) else [_bind(item, found)])]
    if isinstance(value, dict):
        return {key: _bind(item, found) for key, item in value.items()}
    return value


def _shell_line(line: str, found: list[Any]) -> str:
    """The marked command line with each value quoted for a shell, wherever its mark sits."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        mark = _MARK.match(line, i)
        if mark is not None:
            value = found[int(mark.group(1))]
            before, after = (line[i - 1: i], line[mark.end(): mark.end() + 1])
            alone = not quote and before in ("", " ") and after in ("", " ")
            if isinstance(value, list) and alone:
                quoted = " ".join(shlex.quote(str(item)) for item in value)
            else:
                quoted = shlex.quote(_text(value))
            out.append(f"{quote}{quoted}{quote}" if quote else quoted)  # close, value, reopen
            i = mark.end()
            continue
        char = line[i]
        if char in "'\"" and (not quote or quote == char):
            quote = "" if quote else char
        out.append(char)
        i += 1
    return "".join(out)


def bind_command(text: str, values: Mapping[str, Any],
                 parse: Callable[[str], Action]) -> Action:
    """Parse `text` (a step's `action`) with its `{var}` values as whole arguments.

    A command whose verb itself is a variable (`action = "{next}"`) is command
    text on purpose and is interpolated and parsed as a whole.
    """
    marked, found = _marked(text, values)
    if not found:
        return parse(marked)
    head = marked.strip().split(None, 1)[0] if marked.strip() else ""
    if _MARK.search(head):
        return parse(_unmark(marked, found))
    action = parse(marked)
    action.params = _bind(action.params, found)
    first, newline, rest = action.text.partition("\n")
    action.text = _shell_line(first, found) + newline + _unmark(rest, found)
    return action
