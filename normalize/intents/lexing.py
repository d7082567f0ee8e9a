"""The words of one line: decoration stripped, comment cut, arguments split like a shell's."""

from __future__ import annotations

import re
import shlex

from normalize.verbs import Verb

PATH_VERBS = frozenset({"view", "skeleton", "edit", "write", "test", "analyze", "fetch"})
TEXT_VERBS = frozenset({"note", "remember", "plan", "ask", "done"})

HEAD_RE = re.compile(r"(\S+)(?:\s+(.*))?\Z", re.DOTALL)
_DECORATION_RE = re.compile(r"(?:[-*+•]\s+|\d{1,3}[.)]\s+|\$\s+|%\s+|>(?!>)\s*)")
_BACKTICKED_RE = re.compile(r"`([^`]+)`")
_COMMENT_RE = re.compile(r"\s#\s.*\Z")
_TURNS_RE = re.compile(r"(--turns)\s+(\S+)(?:\s+(.*))?\Z", re.DOTALL)


def kind(verb: Verb) -> str:
    """`text` (takes a sentence), `path` (takes paths) or `command` (patterns, programs)."""
    if verb.name in TEXT_VERBS:
        return "text"
    return "path" if verb.name in PATH_VERBS else "command"


def split_lines(text: str) -> list[str]:
    """The lines of `text` (any newline convention), without a trailing empty one."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def undecorate(line: str) -> str:
    """The line without indentation, bullets, prompts or wrapping backticks."""
    s = line.strip()
    for _ in range(3):
        m = _DECORATION_RE.match(s)
        if not m or m.end() == len(s):
            break
        s = s[m.end() :].lstrip()
    m = _BACKTICKED_RE.fullmatch(s)
    return m.group(1).strip() if m else s


def text_args(verb: Verb, rest: str) -> list[str]:
    """The text of a `note`, `plan`, `ask` or `done` as written: one argument, quotes kept.

    Only `note`'s `--turns N` option is split off (`["--turns", "N", TEXT]`).
    """
    text = rest.strip()
    if verb.name == "note":
        m = _TURNS_RE.match(text)
        if m is not None:
            return [m.group(1), m.group(2), *([m.group(3)] if m.group(3) else [])]
    return [text] if text else []


def split_args(verb: Verb, rest: str) -> tuple[list[str], bool]:
    """The arguments of `rest` and whether its quotes balanced.

    Text verbs keep their text as written (`text_args`); the others split like
    a shell (quotes group, backslashes kept).
    """
    verb_kind = kind(verb)
    if verb_kind == "text":
        return text_args(verb, rest), True
    lex = shlex.shlex(rest, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    lex.escape = ""
    try:
        words = list(lex)
    except ValueError:
        return rest.split(), False
    if verb.name != "run":
        words = [w[1:-1] if len(w) > 2 and w[0] == w[-1] == "`" else w for w in words]
    return words, True


def strip_comment(rest: str) -> str:
    """`rest` without a trailing ` # comment` (one outside quotes)."""
    m = _COMMENT_RE.search(rest)
    if m is None:
        return rest
    before = rest[: m.start()]
    if before.count("'") % 2 or before.count('"') % 2:
        return rest
    return before.rstrip()
