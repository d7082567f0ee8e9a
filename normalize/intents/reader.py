"""Walking a reply's lines once: which are prose, which are commands (with their bodies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normalize.intents.bodies import (
    FENCE_RE,
    NOT_RUN,
    PROSE_HEREDOC_RE,
    REJECTED,
    Heredoc,
    cut_heredoc,
    fence_closes,
    find_fence_end,
    find_terminator,
    read_body,
)
from normalize.intents.lexing import HEAD_RE, kind, split_args, strip_comment, undecorate
from normalize.intents.prose import Suggestion, correct, reads_as_prose
from normalize.task import Action
from normalize.verbs import PARALLEL_WORD, Verb, verb_for

SHELL_LANGS = frozenset(
    "bash sh shell console zsh text txt plaintext shell-session normalize command commands".split()
) | {""}
"""Fence languages whose lines are read as commands (any other fence is prose)."""


@dataclass(frozen=True)
class Correction:
    """A mistyped verb that was corrected: `word` as written, the verb it became, its line."""

    word: str
    corrected_to: str
    line: int


@dataclass
class Cmd:
    """A line recognised as a command, before its body is read."""

    verb: Verb
    word: str
    rest: str
    line: str
    heredoc: Heredoc | None


@dataclass
class Item:
    kind: str  # "prose" | "action" | "parallel"
    line: int
    text: str = ""
    action: Action | None = None


class Reader:
    """Walks the lines of a reply once, collecting prose, actions and diagnostics."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.items: list[Item] = []
        self.corrections: list[Correction] = []
        self.suggestions: list[str] = []
        self.problems: list[str] = []
        self.n_actions = 0
        self.fence: str | None = None  # marker of the unattached shell fence we are in
        self.fence_item = 0  # where that fence's opening line is in `items`
        self.fence_actions = 0  # how many actions there were before it
        self.stopped = False  # a command's body never closed: the rest of the reply is not read

    def prose(self, index: int) -> None:
        self.items.append(Item("prose", index + 1, self.lines[index].rstrip()))

    def read(self) -> None:
        """Read every line, in order, into `items`."""
        i = 0
        while i < len(self.lines) and not self.stopped:
            i = self.read_line(i)
        if self.stopped and self.fence is not None and self.n_actions > self.fence_actions:
            del self.items[self.fence_item]

    def read_line(self, i: int) -> int:
        """Read the line at `i` (and what belongs to it); the index of the next one to read."""
        lines = self.lines
        line = lines[i].rstrip()
        if self.fence is not None and fence_closes(line, self.fence):
            return self.close_fence(i)
        m = FENCE_RE.fullmatch(line) if self.fence is None else None
        if m is not None:
            return self.open_fence(i, m.group(1), m.group(2))
        stripped = undecorate(line)
        if stripped == PARALLEL_WORD:
            self.items.append(Item("parallel", i + 1))
            return i + 1
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        cmd = self.classify(stripped, i + 1, FENCE_RE.fullmatch(nxt.rstrip()) is not None)
        if cmd is not None:
            return self.command(cmd, i)
        self.prose(i)
        h = PROSE_HEREDOC_RE.search(line)
        if h is None:
            return i + 1
        end = find_terminator(lines, i + 1, h.group(3), self.fence)
        closed = end < len(lines) and lines[end].strip() == h.group(3)
        for k in range(i + 1, end + 1 if closed else end):
            self.prose(k)
        return end + 1 if closed else end

    def open_fence(self, i: int, marker: str, lang: str) -> int:
        """A fence opens: a shell fence's lines are read on; any other fence is prose."""
        if lang.lower() in SHELL_LANGS:
            self.fence_item, self.fence_actions = len(self.items), self.n_actions
            self.fence = marker
            self.prose(i)
            return i + 1
        end = find_fence_end(self.lines, i + 1, marker)
        for k in range(i, min(end + 1, len(self.lines))):
            self.prose(k)
        return end + 1

    def close_fence(self, i: int) -> int:
        """A shell fence closes: its fence lines vanish when commands were read inside."""
        if self.n_actions > self.fence_actions:
            del self.items[self.fence_item]
        else:
            self.prose(i)
        self.fence = None
        return i + 1

    def classify(self, stripped: str, lineno: int, fence_next: bool) -> Cmd | None:
        """The command on this (undecorated) line, or None when it is prose."""
        m = HEAD_RE.match(stripped)
        if m is None:
            return None
        word, rest = m.group(1), m.group(2) or ""
        rest, heredoc = cut_heredoc(rest)
        verb = verb_for(word)
        if verb is None and not rest and word[-1:] in ".!":
            short = verb_for(word[:-1])
            if short is not None and short.takes_no_args:
                return Cmd(short, word, "", stripped, heredoc)
        if verb is None:
            found = correct(word, rest, fence_next or heredoc is not None)
            if isinstance(found, Suggestion):
                self.suggest(lineno, word, found.names, found.why)
                return None
            if found is None:
                return None
            verb = found
        rest = strip_comment(rest) if kind(verb) != "text" else rest
        if reads_as_prose(verb, rest):
            return None
        if verb_for(word) is None:
            self.corrections.append(Correction(word, verb.name, lineno))
        return Cmd(verb, word, rest, stripped, heredoc)

    def suggest(self, lineno: int, word: str, names: list[str], why: str) -> None:
        options = " or ".join(f"`{n}`" for n in names)
        self.suggestions.append(f"line {lineno}: did you mean {options}? (`{word}` {why})")

    def command(self, cmd: Cmd, i: int) -> int:
        """Read the command at line `i` with its body; the index of the next line to read.

        A command whose body never closes becomes a rejected action (its
        `params["rejected"]` says why; the engine answers it with that error and
        runs nothing), and the reader stops: nothing after it in the reply runs.
        """
        body = read_body(self.lines, i, cmd.heredoc, cmd.verb.takes_body, self.fence)
        args, balanced = split_args(cmd.verb, cmd.rest)
        if not balanced:
            self.problems.append(
                f"line {i + 1}: unbalanced quotes in `{cmd.line}`; words split on spaces"
            )
        params: dict[str, Any] = {"args": args, "body": body.text}
        if body.unclosed is not None:
            head = " ".join([cmd.verb.name, *args[:1]]) if kind(cmd.verb) != "text" \
                else cmd.verb.name
            params[REJECTED] = f"{head}: {body.unclosed}{NOT_RUN}"
            self.stopped = True
        action = Action(tool=cmd.verb.name, params=params,
                        text="\n".join([cmd.line, *body.lines]))
        self.items.append(Item("action", i + 1, action=action))
        self.n_actions += 1
        return body.next
