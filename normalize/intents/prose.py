"""Whether the words after a verb read as English, and which mistyped verb a word stands for.

The rules are the package docstring's (`normalize.intents`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from normalize.intents.lexing import kind
from normalize.verbs import VERBS, Verb, all_words, verb_for

_OPERATORS = frozenset({"=", "==", "+=", "-=", "*=", "/=", ":=", "->", "=>", "(", ")", "{", ":"})
FUNCTION_WORDS = frozenset(
    """
    a an the this that these those it its me my we us our you your i he she they them their
    what which who whom whose why how when where whether if to for with without of on in
    into onto at by from about out up down over through again and or but so then than now
    is are was were be been being will would should could can may might must do does did
    has have had not no all any each every some both also just only there here as please
    first next yet once after before
    """.split()
)
_BLOCKERS: dict[str, frozenset[str]] = {
    "note": frozenset({"that", "how", "of", "down", "it", "this", "which", "whether", "if"}),
    "ask": frozenset({"yourself", "myself", "ourselves", "themselves", "around"}),
    # `remember that …` proposes a memory; a question or a clause after it is prose
    "remember": frozenset({"when", "how", "why", "what", "where", "whether", "if", "me"}),
    # `done` takes any summary; only words that make it a clause ("done with…") block it.
    "done": frozenset({"with", "yet", "soon", "so", "by", "after", "before", "when", "if"}),
}

_SENTENCE_END_RE = re.compile(r"[A-Za-z)][.?!:]\Z")
_PLAIN_RE = re.compile(r"[a-z]+")
_TYPO_RE = re.compile(r"[a-z]{3,12}")
_MARKER_RE = re.compile(r"""\A[-'"`]|/|\.(?=.)|_|\d|<<""")


def reads_as_prose(verb: Verb, rest: str) -> bool:
    """Whether the words after a verb read as English rather than arguments (module doc)."""
    words = rest.split()
    if not words:
        return False
    blockers = _BLOCKERS.get(verb.name, FUNCTION_WORDS)
    if words[0] in _OPERATORS:
        return True
    if words[0] in blockers:
        # a grep pattern may be any word: `grep a src/a.txt` searches for "a"
        pattern_then_path = verb.name == "grep" and len(words) >= 2 and \
            not _SENTENCE_END_RE.search(words[-1]) and \
            any(_MARKER_RE.search(w) for w in words[1:])
        if not pattern_then_path:
            return True
    verb_kind = kind(verb)
    if verb_kind == "text":
        return False
    if len(words) >= 2 and _SENTENCE_END_RE.search(words[-1]):
        return True
    if verb_kind == "path":
        if any(w in FUNCTION_WORDS for w in words):
            return True
        if len(words) >= 2 and all(_PLAIN_RE.fullmatch(w) for w in words):
            return True
    return False


def _osa(a: str, b: str, limit: int = 2) -> int:
    """Optimal-string-alignment (restricted Damerau-Levenshtein) distance, capped at limit + 1."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return min(prev[-1], limit + 1)


def _is_swap(a: str, b: str) -> bool:
    """Whether `a` is `b` with two adjacent letters swapped."""
    if len(a) != len(b):
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]


_INFLECTIONS = frozenset(w + s for w in all_words() for s in ("s", "es", "d", "ed", "ing"))


_WORD_VERBS: tuple[tuple[str, Verb], ...] = tuple((v.words[0], v) for v in VERBS) + tuple(
    (a, v) for v in VERBS for a in v.aliases
)


@functools.lru_cache(maxsize=512)
def nearest(word: str) -> tuple[int, tuple[tuple[str, Verb], ...]]:
    """The smallest distance (at most 2) from `word` to a verb word, and the words at it."""
    best = 3
    hits: tuple[tuple[str, Verb], ...] = ()
    for candidate, verb in _WORD_VERBS:
        if abs(len(candidate) - len(word)) > min(best, 2):
            continue
        d = _osa(word, candidate)
        if d < best:
            best, hits = d, ((candidate, verb),)
        elif d == best:
            hits += ((candidate, verb),)
    return best, hits


def _has_markers(rest: str) -> bool:
    return any(_MARKER_RE.search(w) for w in rest.split())


@dataclass(frozen=True)
class Suggestion:
    """A line that looks like a command with a wrong first word: the words it may mean."""

    names: list[str]
    why: str


def correct(word: str, rest: str, body: bool) -> Verb | Suggestion | None:
    """The verb a mistyped first word stands for when confident, else maybe a suggestion.

    `body` says whether a heredoc or a fence follows (something only commands have).
    """
    markers = body or _has_markers(rest)
    lower = word.lower()
    if word != lower:
        exact = verb_for(lower)
        if exact is not None and markers and not reads_as_prose(exact, rest):
            return Suggestion([exact.name], "commands are lowercase")
        return None
    if not _TYPO_RE.fullmatch(word) or word in _INFLECTIONS or word in FUNCTION_WORDS:
        return None
    if rest and not markers:
        # Only a swap could be corrected and no suggestion is due: skip the distances.
        swaps = [v for w, v in _WORD_VERBS if _is_swap(word, w)]
        return swaps[0] if len({v.name for v in swaps}) == 1 and len(word) >= 4 else None
    dist, hits = nearest(word)
    names = list(dict.fromkeys(v.name for _, v in hits))
    if dist == 1 and len(names) == 1 and len(word) >= 4:
        verb = hits[0][1]
        swapped = any(_is_swap(word, w) for w, _ in hits)
        if swapped or (markers and kind(verb) != "text"):
            return verb
    if (markers or not rest) and (dist == 1 or (dist == 2 and len(word) >= 5)):
        return Suggestion([w for w, _ in hits], "read as prose")
    return None
