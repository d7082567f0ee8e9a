"""The command language (DWIM): one parser for model replies, workflow steps and typed commands.

`parse(reply)` splits a reply into prose (kept as thinking) and actions;
`parse_command(text)` reads exactly one command and raises `UsageError` otherwise.
The verbs live in `normalize.verbs`; the contract is COMMANDS.md.

Prose or action? After dropping decoration (indentation, a `- `/`* `/`1. `
bullet, a `$ `/`> ` prompt, single backticks around the whole line), a line is
an action when its first word is a verb or alias written in lowercase (or a
confident typo of one) and the rest does not read as English. The rest reads
as English when:

1. its first word is a function word (`the`, `me`, `that`, `with`, `for`, `=`…),
   as in `show me the diff`, `check that it works`, `done with part one`;
   `note` and `ask` take sentences, so only a few words (`note that…`,
   `ask yourself…`) count for them. Quote a word to use it as an argument
   (`grep "the"`).
2. for verbs whose arguments are paths, patterns or programs (all but note,
   plan, ask, done): it has two or more words and ends like a sentence (a letter
   then `.`, `?`, `!` or `:`), as in `run the tests again.`, `open questions remain.`;
3. for path verbs (view, skeleton, edit, write, test, analyze, fetch): any
   word is a function word, or there are two or more words and all are plain
   lowercase letters (`test results look good`).

A capitalised first word is never a verb, so sentence case (`Show me what
changed.`, `Done with the first part, now the tests.`) is always prose, while
`done Fixed the type error in calc.py.` is an action. `done.` alone counts.

Typos: a lowercase word of 4+ letters at Damerau-Levenshtein (OSA) distance 1
from exactly one verb is corrected when the edit is a swap of adjacent letters
(`veiw`, `gerp`) or, for verbs taking paths, patterns or programs, when the rest
of the line holds something only commands hold (a path, an option, a quote, a
digit, a heredoc, a fence on the next line). Inflections (`tests`, `views`) are
never corrected. Anything weaker stays prose, with a suggestion when the line
looks like a command.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field

from normalize.errors import UsageError
from normalize.task import Action, Decision
from normalize.verbs import (
    PARALLEL_WORD,
    VERBS,
    Verb,
    all_words,
    command_reference,
    system_prompt_section,
    verb_for,
)

__all__ = [
    "VERBS",
    "Correction",
    "ParsedReply",
    "Verb",
    "command_reference",
    "parse",
    "parse_command",
    "system_prompt_section",
    "to_decision",
    "verb_for",
]


@dataclass(frozen=True)
class Correction:
    """A mistyped verb that was corrected: `word` as written, the verb it became, its line."""

    word: str
    corrected_to: str
    line: int


@dataclass
class ParsedReply:
    """A reply split into prose and actions, with what the parser fixed or could not."""

    thinking: str = ""
    actions: list[Action] = field(default_factory=list)
    parallel: bool = False
    done: bool = False
    summary: str = ""
    corrections: list[Correction] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# --- tables -----------------------------------------------------------------

_PATH_VERBS = frozenset({"view", "skeleton", "edit", "write", "test", "analyze", "fetch"})
_TEXT_VERBS = frozenset({"note", "plan", "ask", "done"})

_OPERATORS = frozenset({"=", "==", "+=", "-=", "*=", "/=", ":=", "->", "=>", "(", ")", "{", ":"})
_FUNCTION_WORDS = frozenset(
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
    # `done` takes any summary; only words that make it a clause ("done with…") block it.
    "done": frozenset({"with", "yet", "soon", "so", "by", "after", "before", "when", "if"}),
}

_SHELL_LANGS = frozenset(
    "bash sh shell console zsh text txt plaintext shell-session normalize command commands".split()
) | {""}

_HEAD_RE = re.compile(r"(\S+)(?:\s+(.*))?\Z", re.DOTALL)
_DECORATION_RE = re.compile(r"(?:[-*+•]\s+|\d{1,3}[.)]\s+|\$\s+|%\s+|>(?!>)\s*)")
_BACKTICKED_RE = re.compile(r"`([^`]+)`")
_HEREDOC_RE = re.compile(
    r"(?<!<)<<(-?)[ \t]*(?:'([A-Za-z_]\w*)'|\"([A-Za-z_]\w*)\"|([A-Za-z_]\w*))[ \t]*\Z"
)
_PROSE_HEREDOC_RE = re.compile(r"(?<!<)<<(-?)(['\"]?)([A-Z][A-Z0-9_]*)\2\Z")
_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*\Z")
_COMMENT_RE = re.compile(r"\s#\s.*\Z")
_SENTENCE_END_RE = re.compile(r"[A-Za-z)][.?!:]\Z")
_PLAIN_RE = re.compile(r"[a-z]+")
_TYPO_RE = re.compile(r"[a-z]{3,12}")
_MARKER_RE = re.compile(r"""\A[-'"`]|/|\.(?=.)|_|\d|<<""")
_CONTRACTION_RE = re.compile(r"[A-Za-z]'[A-Za-z]")
_BLANK_RUN_RE = re.compile(r"\n{3,}")


# --- words ------------------------------------------------------------------


def _kind(verb: Verb) -> str:
    if verb.name in _TEXT_VERBS:
        return "text"
    return "path" if verb.name in _PATH_VERBS else "command"


def _reads_as_prose(verb: Verb, rest: str) -> bool:
    """Whether the words after a verb read as English rather than arguments (module doc)."""
    words = rest.split()
    if not words:
        return False
    blockers = _BLOCKERS.get(verb.name, _FUNCTION_WORDS)
    if words[0] in _OPERATORS:
        return True
    if words[0] in blockers:
        # a grep pattern may be any word: `grep a src/a.txt` searches for "a"
        pattern_then_path = verb.name == "grep" and len(words) >= 2 and \
            not _SENTENCE_END_RE.search(words[-1]) and \
            any(_MARKER_RE.search(w) for w in words[1:])
        if not pattern_then_path:
            return True
    kind = _kind(verb)
    if kind == "text":
        return False
    if len(words) >= 2 and _SENTENCE_END_RE.search(words[-1]):
        return True
    if kind == "path":
        if any(w in _FUNCTION_WORDS for w in words):
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
def _nearest(word: str) -> tuple[int, tuple[tuple[str, Verb], ...]]:
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


def _names(hits: tuple[tuple[str, Verb], ...]) -> list[str]:
    return list(dict.fromkeys(v.name for _, v in hits))


def _has_markers(rest: str) -> bool:
    return any(_MARKER_RE.search(w) for w in rest.split())


def _undecorate(line: str) -> str:
    """The line without indentation, bullets, prompts or wrapping backticks."""
    s = line.strip()
    for _ in range(3):
        m = _DECORATION_RE.match(s)
        if not m or m.end() == len(s):
            break
        s = s[m.end() :].lstrip()
    m = _BACKTICKED_RE.fullmatch(s)
    return m.group(1).strip() if m else s


def _split_args(verb: Verb, rest: str) -> tuple[list[str], bool]:
    """Shell-like words of `rest` (quotes group, backslashes kept) and whether quotes balanced."""
    kind = _kind(verb)
    if kind == "text" and _CONTRACTION_RE.search(rest):
        return rest.split(), True
    lex = shlex.shlex(rest, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    lex.escape = ""
    try:
        words = list(lex)
    except ValueError:
        return rest.split(), kind == "text"
    if verb.name != "run":
        words = [w[1:-1] if len(w) > 2 and w[0] == w[-1] == "`" else w for w in words]
    return words, True


def _cut_heredoc(rest: str) -> tuple[str, tuple[bool, str] | None]:
    """`rest` without a trailing `<<TAG`, and (strip leading tabs?, TAG) when there was one."""
    h = _HEREDOC_RE.search(rest)
    if h is None:
        return rest, None
    return rest[: h.start()].rstrip(), (h.group(1) == "-", h.group(2) or h.group(3) or h.group(4))


def _strip_comment(rest: str) -> str:
    m = _COMMENT_RE.search(rest)
    if m is None:
        return rest
    before = rest[: m.start()]
    if before.count("'") % 2 or before.count('"') % 2:
        return rest
    return before.rstrip()


def _fence_closes(line: str, marker: str) -> bool:
    s = line.strip()
    return len(s) >= len(marker) and s == s[0] * len(s) and s[0] == marker[0]


def _unwrap_fence(lines: list[str]) -> list[str]:
    """A heredoc body that is one whole fenced block, without its fence lines."""
    if len(lines) >= 2:
        m = _FENCE_RE.fullmatch(lines[0])
        if m and _fence_closes(lines[-1], m.group(1)):
            return lines[1:-1]
    return lines


def _join_body(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


# --- reading ----------------------------------------------------------------


@dataclass
class _Cmd:
    """A line recognised as a command, before its body is read."""

    verb: Verb
    word: str
    rest: str
    line: str
    heredoc: tuple[bool, str] | None


@dataclass
class _Item:
    kind: str  # "prose" | "action" | "parallel"
    line: int
    text: str = ""
    action: Action | None = None


class _Reader:
    """Walks the lines of a reply once, collecting prose, actions and diagnostics."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.items: list[_Item] = []
        self.corrections: list[Correction] = []
        self.suggestions: list[str] = []
        self.problems: list[str] = []
        self.n_actions = 0
        self.fence: str | None = None  # marker of the unattached shell fence we are in

    def prose(self, index: int) -> None:
        self.items.append(_Item("prose", index + 1, self.lines[index].rstrip()))

    def read(self) -> None:
        lines, i = self.lines, 0
        fence_item = fence_actions = 0
        while i < len(lines):
            line = lines[i].rstrip()
            if self.fence is not None and _fence_closes(line, self.fence):
                if self.n_actions > fence_actions:
                    del self.items[fence_item]
                else:
                    self.prose(i)
                self.fence, i = None, i + 1
                continue
            m = _FENCE_RE.fullmatch(line) if self.fence is None else None
            if m is not None:
                if m.group(2).lower() in _SHELL_LANGS:
                    fence_item, fence_actions = len(self.items), self.n_actions
                    self.fence = m.group(1)
                    self.prose(i)
                    i += 1
                    continue
                end = self.find_fence_end(i + 1, m.group(1))
                for k in range(i, min(end + 1, len(lines))):
                    self.prose(k)
                i = end + 1
                continue
            stripped = _undecorate(line)
            if stripped == PARALLEL_WORD:
                self.items.append(_Item("parallel", i + 1))
                i += 1
                continue
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            cmd = self.classify(stripped, i + 1, _FENCE_RE.fullmatch(nxt.rstrip()) is not None)
            if cmd is not None:
                i = self.command(cmd, i)
                continue
            self.prose(i)
            h = _PROSE_HEREDOC_RE.search(line)
            if h is None:
                i += 1
                continue
            end = self.find_terminator(i + 1, h.group(3))
            closed = end < len(lines) and lines[end].strip() == h.group(3)
            for k in range(i + 1, end + 1 if closed else end):
                self.prose(k)
            i = end + 1 if closed else end

    def find_fence_end(self, start: int, marker: str) -> int:
        """Index of the line closing a fence opened with `marker`, or len(lines)."""
        for k in range(start, len(self.lines)):
            if _fence_closes(self.lines[k], marker):
                return k
        return len(self.lines)

    def find_terminator(self, start: int, tag: str) -> int:
        """Index of the heredoc's `tag` line; at the enclosing fence's end or len(lines)."""
        for k in range(start, len(self.lines)):
            if self.lines[k].strip() == tag:
                return k
            if self.fence is not None and _fence_closes(self.lines[k], self.fence):
                return k
        return len(self.lines)

    def classify(self, stripped: str, lineno: int, fence_next: bool) -> _Cmd | None:
        """The command on this (undecorated) line, or None when it is prose."""
        m = _HEAD_RE.match(stripped)
        if m is None:
            return None
        word, rest = m.group(1), m.group(2) or ""
        rest, heredoc = _cut_heredoc(rest)
        verb = verb_for(word)
        if verb is None and not rest and word[-1:] in ".!":
            short = verb_for(word[:-1])
            if short is not None and short.takes_no_args:
                return _Cmd(short, word, "", stripped, heredoc)
        if verb is None:
            verb = self.correct(word, rest, lineno, fence_next or heredoc is not None)
            if verb is None:
                return None
        rest = _strip_comment(rest) if _kind(verb) != "text" else rest
        if _reads_as_prose(verb, rest):
            return None
        if verb_for(word) is None:
            self.corrections.append(Correction(word, verb.name, lineno))
        return _Cmd(verb, word, rest, stripped, heredoc)

    def correct(self, word: str, rest: str, lineno: int, body: bool) -> Verb | None:
        """The verb a mistyped first word stands for when confident; else maybe a suggestion."""
        markers = body or _has_markers(rest)
        lower = word.lower()
        if word != lower:
            exact = verb_for(lower)
            if exact is not None and markers and not _reads_as_prose(exact, rest):
                self.suggest(lineno, word, [exact.name], "commands are lowercase")
            return None
        if not _TYPO_RE.fullmatch(word) or word in _INFLECTIONS or word in _FUNCTION_WORDS:
            return None
        if rest and not markers:
            # Only a swap could be corrected and no suggestion is due: skip the distances.
            swaps = [v for w, v in _WORD_VERBS if _is_swap(word, w)]
            return swaps[0] if len({v.name for v in swaps}) == 1 and len(word) >= 4 else None
        dist, hits = _nearest(word)
        names = _names(hits)
        if dist == 1 and len(names) == 1 and len(word) >= 4:
            verb = hits[0][1]
            swapped = any(_is_swap(word, w) for w, _ in hits)
            if swapped or (markers and _kind(verb) != "text"):
                return verb
        if (markers or not rest) and (dist == 1 or (dist == 2 and len(word) >= 5)):
            self.suggest(lineno, word, [w for w, _ in hits], "read as prose")
        return None

    def suggest(self, lineno: int, word: str, names: list[str], why: str) -> None:
        options = " or ".join(f"`{n}`" for n in names)
        self.suggestions.append(f"line {lineno}: did you mean {options}? (`{word}` {why})")

    def command(self, cmd: _Cmd, i: int) -> int:
        """Read the command at line `i` with its body; the index of the next line to read."""
        lines, lineno = self.lines, i + 1
        text = [cmd.line]
        body: str | None = None
        nxt = i + 1
        if cmd.heredoc is not None:
            dash, tag = cmd.heredoc
            end = self.find_terminator(i + 1, tag)
            closed = end < len(lines) and lines[end].strip() == tag
            if not closed:
                self.problems.append(
                    f"line {lineno}: heredoc `<<{tag}` is never closed by a line `{tag}`; "
                    "the body takes the rest"
                )
            raw = lines[i + 1 : end]
            text += lines[i + 1 : end + 1 if closed else end]
            if dash:
                raw = [ln.lstrip("\t") for ln in raw]
            body = _join_body(_unwrap_fence(raw))
            nxt = end + 1 if closed else end
        elif cmd.verb.takes_body and i + 1 < len(lines):
            m = _FENCE_RE.fullmatch(lines[i + 1].rstrip())
            if m is not None and self.fence is None:
                end = self.find_fence_end(i + 2, m.group(1))
                if end >= len(lines):
                    self.problems.append(
                        f"line {lineno}: fenced body is never closed; it takes the rest"
                    )
                body = _join_body(lines[i + 2 : end])
                text += lines[i + 1 : end + 1]
                nxt = end + 1
        args, balanced = _split_args(cmd.verb, cmd.rest)
        if not balanced:
            self.problems.append(
                f"line {lineno}: unbalanced quotes in `{cmd.line}`; words split on spaces"
            )
        action = Action(
            tool=cmd.verb.name,
            params={"args": args, "body": body},
            text="\n".join(text),
        )
        self.items.append(_Item("action", lineno, action=action))
        self.n_actions += 1
        return nxt


# --- public -----------------------------------------------------------------


def _lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _summary(action: Action) -> str:
    head = " ".join(action.args)
    body = (action.body or "").strip()
    return f"{head}\n{body}".strip() if body else head


def parse(text: str, *, max_actions: int | None = None) -> ParsedReply:
    """Split a reply into thinking and actions; see the module docstring for the rules.

    `done` itself is not an action: it sets `done` and `summary`. When
    `max_actions` drops actions, a `done` in the same reply is ignored too, so
    the task cannot end with work the model asked for left undone.
    """
    reader = _Reader(_lines(text))
    reader.read()
    out = ParsedReply(
        corrections=reader.corrections,
        suggestions=reader.suggestions,
        problems=reader.problems,
    )
    thinking: list[str] = []
    marked = False
    for item in reader.items:
        if item.kind == "prose":
            thinking.append(item.text)
        elif item.kind == "parallel":
            if out.done:
                continue
            if out.actions:
                out.problems.append(
                    f"line {item.line}: `{PARALLEL_WORD}` after actions has no effect; "
                    "put it before them"
                )
            else:
                marked = True
        elif item.action is not None:
            if out.done:
                out.problems.append(f"line {item.line}: `{item.action.tool}` after `done` not run")
            elif item.action.tool == "done":
                out.done, out.summary = True, _summary(item.action)
            else:
                out.actions.append(item.action)
    if max_actions is not None and len(out.actions) > max_actions:
        dropped = out.actions[max(max_actions, 0) :]
        out.actions = out.actions[: max(max_actions, 0)]
        names = ", ".join(a.tool for a in dropped)
        out.problems.append(
            f"{len(dropped)} action(s) beyond the limit of {max_actions} dropped: {names}"
        )
        if out.done:
            out.done, out.summary = False, ""
            out.problems.append("`done` ignored because actions before it were dropped")
    out.parallel = marked and bool(out.actions)
    out.thinking = _BLANK_RUN_RE.sub("\n\n", "\n".join(thinking)).strip("\n")
    return out


def parse_command(text: str) -> Action:
    """Read exactly one command (with its body), typed by a person or written in a workflow.

    Stricter than `parse`: no typo is corrected (a suggestion is given) and
    anything but one command is a `UsageError`; laxer in that the words after
    the verb are taken literally and the verb's case does not matter.
    """
    lines = _lines(text.strip("\n"))
    if not lines or not lines[0].strip():
        raise UsageError("empty command", hint=f"commands: {', '.join(v.name for v in VERBS)}")
    first = _undecorate(lines[0].rstrip())
    if first == PARALLEL_WORD:
        raise UsageError(f"`{PARALLEL_WORD}` marks a reply's actions; it is not a command")
    word, *more = first.split(None, 1)
    rest, tag = _cut_heredoc(more[0] if more else "")
    verb = verb_for(word) or verb_for(word.lower())
    if verb is None and not rest.strip() and word[-1:] in ".!":
        verb = verb_for(word[:-1].lower())
    if verb is None:
        dist, hits = _nearest(word.lower())
        hint = f"did you mean {' or '.join(f'`{w}`' for w, _ in hits)}?" if dist <= 2 else None
        known = ", ".join(v.name for v in VERBS)
        raise UsageError(
            f"not a command: `{word}`; " + (hint or f"a command starts with one of: {known}"),
            hint=hint,
        )
    if _kind(verb) != "text":
        rest = _strip_comment(rest)
    reader = _Reader(lines)
    nxt = reader.command(_Cmd(verb, word, rest, first, tag), 0)
    extra = [k for k in range(nxt, len(lines)) if lines[k].strip()]
    if extra:
        raise UsageError(
            f"one command expected; line {extra[0] + 1} is more: `{lines[extra[0]].strip()}`"
        )
    for problem in reader.problems:
        if "unbalanced quotes" in problem:
            raise UsageError(f"unbalanced quotes in `{first}`", hint="close the quote or escape it")
    action = reader.items[-1].action
    assert action is not None
    return action


def to_decision(parsed: ParsedReply) -> Decision:
    """The driver-facing Decision for a parsed reply."""
    return Decision(
        actions=list(parsed.actions),
        thinking=parsed.thinking,
        parallel=parsed.parallel,
        done=parsed.done,
        summary=parsed.summary,
    )
