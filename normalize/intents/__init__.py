"""The command language (DWIM): one parser for model replies, workflow steps and typed commands.

`parse(reply)` splits a reply into prose (kept as thinking) and actions;
`parse_command(text)` reads exactly one command and raises `UsageError` otherwise.
The verbs live in `normalize.verbs`; `normalize help commands` prints the reference (README:
"The command language"). The stages are modules: `lexing` (the words of a line),
`bodies` (heredocs and fences), `prose` (English or arguments, typos), `reader` (the walk).

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

import re
from dataclasses import dataclass, field

from normalize.errors import UsageError
from normalize.intents.bodies import NOT_RUN, REJECTED, cut_heredoc
from normalize.intents.lexing import kind, split_lines, strip_comment, undecorate
from normalize.intents.prose import nearest
from normalize.intents.reader import Cmd, Correction, Reader
from normalize.task import Action, Decision
from normalize.verbs import (
    PARALLEL_WORD,
    VERBS,
    Verb,
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
    "rejection",
    "system_prompt_section",
    "to_decision",
    "verb_for",
]

_BLANK_RUN_RE = re.compile(r"\n{3,}")


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


def rejection(action: Action) -> str | None:
    """Why the parser rejected `action` (its body never closed), or None: it may run."""
    why = action.params.get(REJECTED)
    return None if why is None else str(why)


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
    reader = Reader(split_lines(text))
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
            elif item.action.tool == "done" and rejection(item.action) is None:
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
    lines = split_lines(text.strip("\n"))
    if not lines or not lines[0].strip():
        raise UsageError("empty command", hint=f"commands: {', '.join(v.name for v in VERBS)}")
    first = undecorate(lines[0].rstrip())
    if first == PARALLEL_WORD:
        raise UsageError(f"`{PARALLEL_WORD}` marks a reply's actions; it is not a command")
    word, *more = first.split(None, 1)
    rest, tag = cut_heredoc(more[0] if more else "")
    verb = verb_for(word) or verb_for(word.lower())
    if verb is None and not rest.strip() and word[-1:] in ".!":
        verb = verb_for(word[:-1].lower())
    if verb is None:
        dist, hits = nearest(word.lower())
        hint = f"did you mean {' or '.join(f'`{w}`' for w, _ in hits)}?" if dist <= 2 else None
        known = ", ".join(v.name for v in VERBS)
        raise UsageError(
            f"not a command: `{word}`; " + (hint or f"a command starts with one of: {known}"),
            hint=hint,
        )
    if kind(verb) != "text":
        rest = strip_comment(rest)
    reader = Reader(lines)
    nxt = reader.command(Cmd(verb, word, rest, first, tag), 0)
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
    why = rejection(action)
    if why is not None:
        raise UsageError(why.removesuffix(NOT_RUN),
                         hint="end the body with its closing line")
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
