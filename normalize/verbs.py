"""The verbs of the command language and the docs generated from them.

`VERBS` is the single source of truth: the parser (`normalize.intents`), the
`normalize help commands` page and the LLM system prompt all read it, so the
docs and the parser cannot disagree. The README's "The command language" is the
user-facing summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

PARALLEL_WORD = "parallel"
"""A line holding only this word marks the reply's actions as independent."""

SEARCH_MARKER = "<<<<<<< SEARCH"
DIVIDER_MARKER = "======="
REPLACE_MARKER = ">>>>>>> REPLACE"


@dataclass(frozen=True)
class Verb:
    """One verb: its canonical name, aliases, forms, what it does, whether it changes things."""

    name: str
    aliases: tuple[str, ...]
    forms: tuple[str, ...]
    does: str
    side_effect: bool
    takes_body: bool = False
    """Whether a fenced block on the next line is this command's body (a heredoc always is)."""

    @property
    def words(self) -> tuple[str, ...]:
        """The name followed by the aliases."""
        return (self.name, *self.aliases)

    @property
    def takes_no_args(self) -> bool:
        """Whether some form is the bare verb (`test`, `done`), so `test` alone is complete."""
        return any(f == self.name or f.startswith(f"{self.name} [") for f in self.forms)


VERBS: tuple[Verb, ...] = (
    Verb(
        "view",
        ("show", "read", "cat", "open"),
        ("view PATH", "view PATH:START-END", "view PATH/SYMBOL", "view DIR"),
        "file with line numbers; a big file gives its skeleton and a hint; "
        "a symbol (`Class/method` nests) gives its source with the doc comment above it "
        "(several matches: the implementation, the others listed as `NAME@LINE`); "
        "a directory gives a tree",
        False,
    ),
    Verb(
        "skeleton",
        ("outline", "structure"),
        ("skeleton PATH",),
        "signatures of classes and functions, with line numbers",
        False,
    ),
    Verb(
        "grep",
        ("search", "find"),
        ("grep PATTERN [PATH]",),
        "regex search, `path:line: text`, respecting .gitignore",
        False,
    ),
    Verb(
        "edit",
        ("patch", "fix", "replace"),
        ("edit PATH/SYMBOL <<EOF", "edit PATH:START-END <<EOF", "edit PATH <<EOF"),
        "replaces the symbol's source (with its doc comment: the lines `view PATH/SYMBOL` "
        "shows; a name with several definitions is refused, pick one as `NAME@LINE`), "
        "the line range, or each SEARCH text (which must "
        "match exactly once) with its REPLACE text; answers with a unified diff",
        True,
        takes_body=True,
    ),
    Verb(
        "write",
        ("create",),
        ("write PATH <<EOF",),
        "creates or overwrites a file with the body",
        True,
        takes_body=True,
    ),
    Verb(
        "run",
        ("sh", "exec"),
        ("run COMMAND ARGS...",),
        "runs a program in the workspace under the approval policy; output and exit code",
        True,
        takes_body=True,
    ),
    Verb(
        "test",
        (),
        ("test [PATH]",),
        "detects the project's test runner and runs it",
        True,
    ),
    Verb(
        "analyze",
        ("check", "lint"),
        ("analyze [PATH] [--health] [--complexity] [--types] [--lint]",),
        "health summary (files, lines, languages, largest and most complex functions, "
        "TODOs); type checker and linter when installed",
        False,
    ),
    Verb(
        "fetch",
        ("expand",),
        ("fetch ID",),
        "the full text of a cached result whose preview was shown",
        False,
    ),
    Verb(
        "note",
        (),
        ("note TEXT", "note --turns N TEXT"),
        "keeps a note in the current scope (for N turns, or until the scope ends)",
        False,
        takes_body=True,
    ),
    Verb(
        "remember",
        (),
        ("remember TEXT", "remember that TEXT"),
        "proposes a lasting fact about this project (how its tests run, a convention) for "
        "later tasks; it waits in the user's memory inbox until they accept it",
        False,
        takes_body=True,
    ),
    Verb(
        "skill",
        (),
        ("skill NAME",),
        "loads the instructions of a skill from the Skills catalog; they stay in every later "
        "prompt of the task (once is enough)",
        False,
    ),
    Verb(
        "plan",
        ("breakdown",),
        ("plan FIRST; SECOND; THIRD",),
        "adds subtasks to the task tree/list; the context moves to the first",
        False,
        takes_body=True,
    ),
    Verb(
        "ask",
        (),
        ("ask QUESTION",),
        "asks the human; the task waits for the answer",
        False,
        takes_body=True,
    ),
    Verb(
        "mcp",
        (),
        ("mcp SERVER TOOL key=value ...", "mcp SERVER TOOL <<EOF", "mcp SERVER", "mcp"),
        "calls a tool of a configured MCP server (arguments as key=value words, or a JSON "
        "object as the body); `mcp SERVER` lists its tools, `mcp` the servers",
        True,
        takes_body=True,
    ),
    Verb(
        "spawn",
        (),
        ("spawn [--isolated] [--model M] [--budget USD] [--max-turns N] [--merge apply|none] "
         "[--keep] GOAL", "spawn [--isolated] <<EOF"),
        "a sub-task with its own context, model and limits (budget from this task's); spawns "
        "in one reply run side by side; each answers with its summary, status, cost, diff "
        "stat; `--isolated`: in a copy, diff applied back (`--merge none`: reported)",
        True,
        takes_body=True,
    ),
    Verb(
        "done",
        ("finish", "finished"),
        ("done [SUMMARY]",),
        "ends the task (or the current subtask)",
        False,
        takes_body=True,
    ),
)

_BY_WORD: dict[str, Verb] = {word: verb for verb in VERBS for word in verb.words}


def verb_for(word: str) -> Verb | None:
    """The verb whose name or alias is exactly `word`, else None.

    Matching is case-sensitive: verbs are lowercase, so `Show` or `Done` (a
    sentence's first word) is never a verb. That is what keeps "Show me what
    changed." prose.
    """
    return _BY_WORD.get(word)


def all_words() -> tuple[str, ...]:
    """Every verb name and alias, in table order."""
    return tuple(_BY_WORD)


_SEARCH_REPLACE = f"{SEARCH_MARKER}\nexact old text\n{DIVIDER_MARKER}\nnew text\n{REPLACE_MARKER}"

_LINE_RULES = (
    "A line whose first word is a verb or alias (lowercase) is an action; "
    "every other line is prose: kept as thinking, shown, never run.",
    "A command may carry a body: end the line with `<<EOF` and the body is every "
    "following line up to a line that is exactly `EOF` (`<<'EOF'` and `<<-EOF` also "
    "work); or a fenced code block (```) starting on the very next line "
    f"(for {', '.join(v.name for v in VERBS if v.takes_body)}).",
    "A body that never closes (no `EOF` line, no closing fence) makes its command an "
    "error; nothing of the reply from that command on runs.",
    "Arguments are split like a shell splits words: quotes group, nothing is expanded, "
    "backslashes are kept as written; the text of note, remember, plan, ask and done is kept "
    "exactly as written, quotes included.",
    "Several actions run in order; a line `parallel` before them marks them independent: "
    "read-only ones run concurrently and results come back in the order written.",
    "`done` ends the task; actions after it in the same reply are not run.",
    "A mistyped verb (`veiw`, `gerp`) is corrected when the match is confident and "
    "shown; otherwise the line stays prose with a suggestion.",
    "Lines that read as English are prose even when they start with a verb: a "
    "capitalised first word (`Show me…`), a function word after the verb "
    "(`check the logs`), or a sentence where a path belongs (`test results look good.`).",
)


_SINGLE_TICK_RE = re.compile(r"(?<!`)`(?!`)")


def _aliases(verb: Verb) -> str:
    return ", ".join(f"`{a}`" for a in verb.aliases)


def command_reference(markdown: bool = True) -> str:
    """The full command reference: verbs, aliases, forms, effects, and the body rules."""
    if markdown:
        out = [
            "# Commands",
            "",
            "| verb | aliases | form | does | side effect |",
            "|---|---|---|---|---|",
        ]
        for v in VERBS:
            forms = " · ".join(f"`{f}`" for f in v.forms)
            side = "yes" if v.side_effect else "no"
            out.append(f"| `{v.name}` | {_aliases(v) or '—'} | {forms} | {v.does} | {side} |")
        out += ["", "## Lines", ""]
        out += [f"- {rule}" for rule in _LINE_RULES]
        out += [
            "",
            "## SEARCH/REPLACE blocks",
            "",
            "Inside an `edit PATH <<EOF` body, each block replaces text that must match "
            "exactly once:",
            "",
            "```",
            _SEARCH_REPLACE,
            "```",
        ]
        return "\n".join(out) + "\n"
    out = ["COMMANDS", ""]
    for v in VERBS:
        side = "changes things" if v.side_effect else "read-only"
        aliases = f" (also: {', '.join(v.aliases)})" if v.aliases else ""
        out.append(f"{v.name}{aliases} - {side}")
        out += [f"    {f}" for f in v.forms]
        out.append(f"    {v.does}")
    out += ["", "LINES", ""]
    out += [f"  * {_SINGLE_TICK_RE.sub('', rule)}" for rule in _LINE_RULES]
    out += ["", "SEARCH/REPLACE BLOCKS (in an edit body)", ""]
    out += [f"    {line}" for line in _SEARCH_REPLACE.splitlines()]
    return "\n".join(out) + "\n"


def system_prompt_section(omit: Iterable[str] = ()) -> str:
    """The compact command reference for an LLM's system prompt, without the verbs in `omit`.

    (The agent leaves out `mcp` when no MCP server is configured: a line the model
    could only misuse costs tokens on every request.)
    """
    left_out = set(omit)
    out = [
        "## How to reply",
        "Write prose lines (your reasoning; shown, never run) and command lines. "
        "A command line starts with a lowercase verb; put each command on its own line, "
        "with no bullet, prompt or backticks.",
        "",
        "Commands:",
    ]
    for v in VERBS:
        if v.name in left_out:
            continue
        notes = [f"aliases: {', '.join(v.aliases)}"] if v.aliases else []
        notes += ["changes things"] if v.side_effect else []
        extra = f" ({'; '.join(notes)})" if notes else ""
        out.append(f"- {' · '.join(v.forms)}: {v.does}{extra}")
    out += [
        "",
        "A body goes in a heredoc: end the command with <<EOF, write the body, then a line "
        "that is exactly EOF. Lines inside a body are never run. A body that never closes "
        "runs nothing from its command on.",
        "An edit body holds SEARCH/REPLACE blocks; each SEARCH text must match exactly once:",
        _SEARCH_REPLACE,
        "Arguments split like shell words: quote ones with spaces; nothing is expanded. "
        "The text of note, remember, plan, ask and done is kept as written.",
        f"Commands run in order. Put a line `{PARALLEL_WORD}` before independent read-only "
        "commands to run them together.",
        "Finish with `done SUMMARY`; commands after it do not run.",
    ]
    return "\n".join(out) + "\n"
