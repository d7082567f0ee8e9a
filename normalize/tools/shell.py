"""Shell syntax in command words: normalize runs programs without a shell.

`split_chain` finds the operators a shell would interpret (`&&`, `||`, `;`,
`|`, `>`, `<`, `&`, `$(`, backticks) in words split like a shell splits them,
so the approval policy can judge a chained command part by part and the `run`
tool can refuse what it would otherwise pass to a program verbatim.
"""

from __future__ import annotations

import re
import shlex

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
