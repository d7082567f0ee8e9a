"""The command splitters read words as `shlex` does, in time linear in a word's length."""

from __future__ import annotations

import random
import shlex

import pytest

from normalize.tools.shell import split_operators, split_words

ALPHABET = ["a", "b", " ", "\t", "'", '"', "\\", ";", "&", "|", "<", ">", "#", "$", "\n"]


def _shlex(text: str, *, punctuation: bool) -> list[str] | str:
    if punctuation:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    else:
        lexer = shlex.shlex(text, posix=True)
        lexer.escape = ""
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return "error"


def _ours(text: str, *, punctuation: bool) -> list[str] | str:
    try:
        return split_operators(text) if punctuation else split_words(text)
    except ValueError:
        return "error"


@pytest.mark.parametrize("punctuation", [False, True])
def test_words_are_split_as_shlex_splits_them(punctuation: bool) -> None:
    rng = random.Random(37)
    for _ in range(20_000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        assert _ours(text, punctuation=punctuation) == _shlex(text, punctuation=punctuation), \
            repr(text)
