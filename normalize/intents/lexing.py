"""The words of one line: decoration stripped, comment cut, arguments split like a shell's."""

from __future__ import annotations

import re
import shlex

from normalize.verbs import Verb

PATH_VERBS = frozenset({"view", "skeleton", "edit", "write", "test", "analyze", "fetch"})
TEXT_VERBS = frozenset({"note", "plan", "ask", "done"})

HEAD_RE = re.compile(r"(\S+)(?:\s+(.*))?\Z", re.DOTALL)
_DECORATION_RE = re.compile(r"(?:[-*+•]\s+|\d{1,3}[.)]\s+|\$\s+|%\s+|>(?!>)\s*)")
_BACKTICKED_RE = re.compile(r"`([^`]+)`")
_COMMENT_RE = re.compile(r"\s#\s.*\Z")
_CONTRACTION_RE = re.compile(r"[A-Za-z]'[A-Za-z]")


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


def split_args(verb: Verb, rest: str) -> tuple[list[str], bool]:
    """Shell-like words of `rest` (quotes group, backslashes kept) and whether quotes balanced."""
    verb_kind = kind(verb)
    if verb_kind == "text" and _CONTRACTION_RE.search(rest):
        return rest.split(), True
    lex = shlex.shlex(rest, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    lex.escape = ""
    try:
        words = list(lex)
    except ValueError:
        return rest.split(), verb_kind == "text"
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
