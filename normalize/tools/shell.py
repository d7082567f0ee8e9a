"""Shell syntax in command words: normalize runs programs without a shell.

`split_chain` finds the operators a shell would interpret (`&&`, `||`, `;`,
`|`, `>`, `<`, `&`, `$(`, backticks) in words split like a shell splits them,
so the approval policy can judge a chained command part by part and the `run`
tool can refuse what it would otherwise pass to a program verbatim.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from normalize.task import Action

OPERATORS = ("&&", "||", ";", "|", ">>", ">", "<", "&")
_OPERATOR_RE = re.compile(r"(&&|\|\||;|\||>>|>|<|&)")
_SUBSTITUTION_RE = re.compile(r"\$\(|`")


def has_shell_syntax(words: list[str]) -> bool:
    """True when a word holds an operator or a command substitution."""
    return any(_OPERATOR_RE.search(w) or _SUBSTITUTION_RE.search(w) for w in words)


def split_chain(words: list[str]) -> list[list[str]]:
    """The simple commands of a chain: `["a", "x;", "b"]` → `[["a", "x"], ["b"]]`.

    A single word holding a whole chain (`"pytest; rm -rf ~"`) is split with
    shell rules first. Redirection targets stay with their command. Command
    substitutions are kept inside their word; callers refuse them outright.
    """
    if len(words) == 1 and _OPERATOR_RE.search(words[0]):
        try:
            words = shlex.split(words[0])
        except ValueError:
            words = words[0].split()
    parts: list[list[str]] = [[]]
    for word in words:
        for piece in _OPERATOR_RE.split(word):
            if not piece:
                continue
            if piece in OPERATORS:
                if piece in ("&&", "||", ";", "|", "&"):
                    parts.append([])
                else:
                    parts[-1].append(piece)
            else:
                parts[-1].append(piece)
    return [p for p in parts if p]


def unquoted_operators(text: str) -> list[str]:
    """What a shell would act on in `text`: unquoted `;&|<>`, `$(` and backticks (ValueError
    on an unclosed quote)."""
    found: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        char = text[i]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            i += 1  # the next character is escaped
        elif char == "`" or text.startswith("$(", i):
            found.append("$(")
        elif char == '"':
            quote = "" if quote else '"'
        elif not quote and char == "'":
            quote = "'"
        elif not quote and char in ";&|<>":
            found.append(char)
        i += 1
    if quote:
        raise ValueError("unclosed quote")
    return found


# Words as `shlex` (POSIX mode, split on whitespace, no comments) reads them, found by one
# regex each, so the time is linear in a word's length (`shlex` adds a word's characters
# one by one: a 200 KB argument took seconds). `tests/tools/test_shell_split.py` holds
# them to `shlex` on random text.
_BLANK = re.compile(r"[ \t\r\n]*")
_WORD = re.compile(r"""(?:[^ \t\r\n'"]+|'[^']*'|"[^"]*")+""")
_QUOTED = re.compile(r"'([^']*)'|" + r'"([^"]*)"')
_WORD_ESC = re.compile(r"(?:[^ \t\r\n'\"\\;&|<>]+|\\[\s\S]|'[^']*'"
                       r'|"(?:[^"\\]|\\[\s\S])*")+|[;&|<>]+')
_QUOTED_ESC = re.compile(r"\\([\s\S])|'([^']*)'|" + r'"((?:[^"\\]|\\[\s\S])*)"')
_IN_DOUBLE = re.compile(r'\\(["\\])')


def _tokens(text: str, word: re.Pattern[str]) -> list[str]:
    """The raw words of `text` (quotes still on); ValueError where none can start."""
    out = []
    at = _BLANK.match(text).end()  # type: ignore[union-attr]
    while at < len(text):
        found = word.match(text, at)
        if found is None:
            raise ValueError("No escaped character" if text[at] == "\\" else
                             "No closing quotation")
        out.append(found.group())
        at = _BLANK.match(text, found.end()).end()  # type: ignore[union-attr]
    return out


def split_words(text: str) -> list[str]:
    """Words as the command parser splits them: quotes group, backslashes stay."""
    return [_QUOTED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), raw)
            for raw in _tokens(text, _WORD)]


def _unescaped(match: re.Match[str]) -> str:
    if match.group(1) is not None:  # `\x` outside quotes is `x`
        return match.group(1)
    if match.group(2) is not None:
        return match.group(2)
    return _IN_DOUBLE.sub(r"\1", match.group(3))  # in double quotes only `\"` and `\\`


def split_operators(text: str) -> list[str]:
    """Words and runs of `;&|<>` as `shlex` with those as punctuation reads them (backslash
    escapes; ValueError on an unclosed quote or a trailing backslash)."""
    return [_QUOTED_ESC.sub(_unescaped, raw) for raw in _tokens(text, _WORD_ESC)]


def text_after_verb(action: Action) -> str | None:
    """The command text after the verb, when it splits into exactly `action.args`."""
    text = action.text.strip()
    if not text or "\n" in text:
        return None
    parts = text.split(None, 1)
    if len(parts) != 2:
        return None
    try:
        words = split_words(parts[1])
    except ValueError:
        return None
    return parts[1] if words == action.args else None


def _chain_of_words(words: list[str]) -> list[list[str]]:
    """`split_chain` for words without their text, where an argument holding whitespace is
    one literal argument (as the `run` tool passes it, without a shell), not a chain."""
    literal = {f"\ue002{i}": w for i, w in enumerate(words)
               if i and any(c.isspace() for c in w)}
    if not literal:
        return split_chain(words)
    held = {w: k for k, w in literal.items()}
    parts = split_chain([held.get(w, w) if i else w for i, w in enumerate(words)])
    return [[literal.get(w, w) for w in part] for part in parts]


_CHAIN_TOKENS = frozenset({";", "&&", "||", "|", "&", ";;", "|&"})


def command_parts(action: Action) -> list[list[str]]:
    """The simple commands of a `run` action, judged on the text as written when possible.

    Operators inside quotes (`python -c "a; b"`) are part of a word, not a chain.
    Without trustworthy text, falls back to `split_chain` on the words.
    """
    rest = text_after_verb(action)
    if rest is None:
        return _chain_of_words(action.args)
    try:
        tokens = split_operators(rest)
    except ValueError:
        return split_chain(action.args)
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _CHAIN_TOKENS:
            parts.append([])
        else:
            parts[-1].append(token)
    out: list[list[str]] = []
    for part in parts:
        if len(part) == 1 and _OPERATOR_RE.search(part[0]):
            out.extend(split_chain(part))  # a whole chain quoted as one word: judge its parts
        elif part:
            out.append(part)
    return out
