"""The command language: prose vs actions, bodies, typos, done/parallel, docs from VERBS."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from normalize.errors import UsageError
from normalize.intents import (
    VERBS,
    Correction,
    ParsedReply,
    command_reference,
    parse,
    parse_command,
    system_prompt_section,
    to_decision,
    verb_for,
)
from normalize.task import Action, Decision

Act = tuple[str, list[str], str | None]


@dataclass
class Case:
    """One reply and everything `parse` must make of it; unset lists must come back empty."""

    text: str
    actions: list[Act] = field(default_factory=list)
    thinking: str | None = None
    done: bool = False
    summary: str = ""
    parallel: bool = False
    corrected: list[tuple[str, str]] = field(default_factory=list)
    suggest: str | None = None
    problem: str | None = None
    max_actions: int | None = None


SR_BODY = (
    "<<<<<<< SEARCH\n"
    '    return add(xs[0], "1") / len(xs)\n'
    "=======\n"
    "    return add(xs[0], 1) / len(xs)\n"
    ">>>>>>> REPLACE\n"
)

LOOKS_LIKE_COMMANDS = "view x.py\ndone\nparallel\n```bash\nrun rm -rf /\n```\n"

CASES: dict[str, Case] = {
    # --- prose and plain commands
    "prose-only": Case("I think the bug is in calc.py.\nLet me look.", thinking=None),
    "empty": Case(""),
    "mixed-prose-then-command": Case(
        "The call passes a str where an int is expected. Let me see the function.\n"
        "view calc.py/mean",
        actions=[("view", ["calc.py/mean"], None)],
        thinking="The call passes a str where an int is expected. Let me see the function.",
    ),
    "line-range": Case("view calc.py:10-20", actions=[("view", ["calc.py:10-20"], None)]),
    "grep-with-path": Case("grep 'def mean' src/", actions=[("grep", ["def mean", "src/"], None)]),
    "grep-pattern-is-a-function-word": Case(
        "grep a src/a.txt", actions=[("grep", ["a", "src/a.txt"], None)]
    ),
    "grep-as-prose": Case(
        "grep for the bug in the code.", thinking="grep for the bug in the code."
    ),
    "done-summary-starts-with-article": Case(
        "done the log is full", done=True, summary="the log is full"
    ),
    "done-with-is-prose": Case(
        "done with the tests, now lint", thinking="done with the tests, now lint"
    ),
    "backslashes-kept": Case(
        r"grep def\s+main(\w*) .", actions=[("grep", [r"def\s+main(\w*)", "."], None)]
    ),
    "quotes-group": Case(
        "run git commit -m \"it's fixed\" --author 'A B'",
        actions=[("run", ["git", "commit", "-m", "it's fixed", "--author", "A B"], None)],
    ),
    "unbalanced-quotes": Case(
        "run echo 'oops",
        actions=[("run", ["echo", "'oops"], None)],
        problem="unbalanced quotes",
    ),
    "contraction-in-text-verb": Case(
        "ask Which database should I use? It's not in the README.",
        actions=[
            ("ask", ["Which database should I use? It's not in the README."], None)
        ],
    ),
    "trailing-comment": Case(
        "view calc.py  # look at the helper", actions=[("view", ["calc.py"], None)]
    ),
    "test-bare": Case("test", actions=[("test", [], None)]),
    "test-path": Case("test tests/test_x.py", actions=[("test", ["tests/test_x.py"], None)]),
    "several-in-order": Case(
        "view a.py\nskeleton b.py\nanalyze --health",
        actions=[
            ("view", ["a.py"], None),
            ("skeleton", ["b.py"], None),
            ("analyze", ["--health"], None),
        ],
    ),
    # --- aliases
    "alias-cat": Case("cat calc.py", actions=[("view", ["calc.py"], None)]),
    "alias-sh": Case("sh pytest -q", actions=[("run", ["pytest", "-q"], None)]),
    "alias-outline": Case("outline calc.py", actions=[("skeleton", ["calc.py"], None)]),
    "alias-finish": Case("finish All green.", done=True, summary="All green."),
    "alias-find": Case("find TODO src", actions=[("grep", ["TODO", "src"], None)]),
    # --- bodies
    "heredoc-search-replace": Case(
        f"Fixing the argument type.\nedit calc.py <<EOF\n{SR_BODY}EOF\nrun mypy calc.py",
        actions=[("edit", ["calc.py"], SR_BODY), ("run", ["mypy", "calc.py"], None)],
        thinking="Fixing the argument type.",
    ),
    "heredoc-commandlike-body": Case(
        f"write notes.md <<'END'\n{LOOKS_LIKE_COMMANDS}END",
        actions=[("write", ["notes.md"], LOOKS_LIKE_COMMANDS)],
    ),
    "heredoc-double-quoted-tag": Case(
        'write a.txt <<"EOF"\nhello\nEOF', actions=[("write", ["a.txt"], "hello\n")]
    ),
    "heredoc-dash-strips-tabs": Case(
        "write a.txt <<-EOF\n\thello\n\tEOF", actions=[("write", ["a.txt"], "hello\n")]
    ),
    "heredoc-wrapping-fence-dropped": Case(
        "write a.py <<EOF\n```python\nx = 1\n```\nEOF", actions=[("write", ["a.py"], "x = 1\n")]
    ),
    "heredoc-unterminated": Case(
        "write a.py <<EOF\nx = 1\nview y.py",
        actions=[("write", ["a.py"], None)],  # rejected; see tests/replies/
    ),
    "fenced-body": Case(
        "write hello.py\n```python\nprint('hi')\nview not_a_command.py\n```\nview hello.py",
        actions=[
            ("write", ["hello.py"], "print('hi')\nview not_a_command.py\n"),
            ("view", ["hello.py"], None),
        ],
    ),
    "fence-after-read-only-verb-not-body": Case(
        "view a.py\n```bash\nview b.py\n```",
        actions=[("view", ["a.py"], None), ("view", ["b.py"], None)],
    ),
    "unattached-bash-fence": Case(
        "Let me look.\n```bash\nview x.py\ngrep foo\n```\nThat should do.",
        actions=[("view", ["x.py"], None), ("grep", ["foo"], None)],
        thinking="Let me look.\nThat should do.",
    ),
    "python-fence-is-prose": Case(
        "Here is the idea:\n```python\ntest = run(x)\nview = 1\n```",
        thinking="Here is the idea:\n```python\ntest = run(x)\nview = 1\n```",
    ),
    "markdown-fence-is-prose": Case(
        "The README should say:\n```markdown\n    view calc.py\n```",
        thinking="The README should say:\n```markdown\n    view calc.py\n```",
    ),
    # --- parallel and done
    "parallel": Case(
        "parallel\nview a.py\nview b.py",
        actions=[("view", ["a.py"], None), ("view", ["b.py"], None)],
        parallel=True,
    ),
    "parallel-after-actions": Case(
        "view a.py\nparallel\nview b.py",
        actions=[("view", ["a.py"], None), ("view", ["b.py"], None)],
        problem="`parallel` after actions",
    ),
    "done-bare": Case("done", done=True),
    "done-dot": Case("All fixed.\ndone.", done=True, thinking="All fixed."),
    "done-summary-sentence": Case(
        "done Fixed the type error in calc.py.",
        done=True,
        summary="Fixed the type error in calc.py.",
    ),
    "done-in-middle": Case(
        "run pytest\ndone Tests pass\nedit x.py <<EOF\nboom\nEOF\nBye.",
        actions=[("run", ["pytest"], None)],
        done=True,
        summary="Tests pass",
        thinking="Bye.",
        problem="`edit` after `done` not run",
    ),
    "max-actions": Case(
        "view a.py\nview b.py\nview c.py",
        actions=[("view", ["a.py"], None), ("view", ["b.py"], None)],
        max_actions=2,
        problem="1 action(s) beyond the limit of 2",
    ),
    "max-actions-cancels-done": Case(
        "view a.py\nview b.py\ndone Looked.",
        actions=[("view", ["a.py"], None)],
        max_actions=1,
        problem="beyond the limit",
    ),
    # --- typos
    "typo-veiw": Case(
        "veiw x.py", actions=[("view", ["x.py"], None)], corrected=[("veiw", "view")]
    ),
    "typo-gerp": Case("gerp foo", actions=[("grep", ["foo"], None)], corrected=[("gerp", "grep")]),
    "typo-substitution-with-path": Case(
        "skelton calc.py",
        actions=[("skeleton", ["calc.py"], None)],
        corrected=[("skelton", "skeleton")],
    ),
    "typo-too-short": Case("vie x.py", thinking="vie x.py", suggest="did you mean `view`?"),
    "typo-ambiguous": Case(
        "fint src/x.py", thinking="fint src/x.py", suggest="did you mean `find` or `lint`?"
    ),
    "typo-text-verb-swap": Case(
        "dnoe All good.", done=True, summary="All good.", corrected=[("dnoe", "done")]
    ),
    "typo-text-verb-needs-swap": Case(
        "node server.js", thinking="node server.js", suggest="did you mean `note`?"
    ),
    "typo-real-word-ambiguous": Case("none of the tests fail", thinking="none of the tests fail"),
    "typo-inflection": Case("tests pass: 12/12", thinking="tests pass: 12/12"),
    "random-word": Case("blorp x.py", thinking="blorp x.py"),
    "capitalised-verb-suggests": Case(
        "View calc.py", thinking="View calc.py", suggest="did you mean `view`?"
    ),
    # --- English prose that starts with a verb or alias
    "prose-show-me": Case("Show me what changed."),
    "prose-done-with": Case("Done with the first part, now the tests."),
    "prose-test-results": Case("Test results look good."),
    "prose-lower-show-me": Case("show me what changed"),
    "prose-lower-done-with": Case("done with the first part, now the tests."),
    "prose-lower-test-results": Case("test results look good"),
    "prose-check-that": Case("check that the fix works"),
    "prose-find-out": Case("find out why it fails"),
    "prose-read-through": Case("read through calc.py"),
    "prose-view-purpose": Case("view calc.py to see the flow"),
    "prose-run-sentence": Case("run pytest until everything passes."),
    "prose-open-sentence": Case("open questions remain."),
    "prose-plan-is": Case("plan is to fix calc first"),
    "prose-note-that": Case("note that mean() divides by len(xs)"),
    "prose-code-assignment": Case("test = 1"),
    "prose-headings-and-colons": Case("Plan:\nnote: keep it small\ndone:"),
    # --- DWIM decoration
    "crlf": Case(
        "Looking.\r\nview x.py\r\nedit x.py <<EOF\r\na\r\nEOF\r\n",
        actions=[("view", ["x.py"], None), ("edit", ["x.py"], "a\n")],
        thinking="Looking.",
    ),
    "trailing-whitespace": Case(
        "view x.py   \t\ndone   ", actions=[("view", ["x.py"], None)], done=True
    ),
    "bullets": Case(
        "- view a.py\n* grep foo\n2. test",
        actions=[("view", ["a.py"], None), ("grep", ["foo"], None), ("test", [], None)],
    ),
    "dollar-and-quote-prompts": Case(
        "$ run ls -la\n> view x.py",
        actions=[("run", ["ls", "-la"], None), ("view", ["x.py"], None)],
    ),
    "backticked-line": Case(
        "`view x.py`\n- `grep TODO`", actions=[("view", ["x.py"], None), ("grep", ["TODO"], None)]
    ),
    "backticked-arg": Case("view `calc.py`", actions=[("view", ["calc.py"], None)]),
    "note-and-plan": Case(
        "note --turns 3 mean() must stay pure\nplan fix mean; add a test; run mypy",
        actions=[
            ("note", ["--turns", "3", "mean() must stay pure"], None),
            ("plan", ["fix mean; add a test; run mypy"], None),
        ],
    ),
}

PROSE_ONLY = {k for k, c in CASES.items() if k.startswith("prose-")}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_parse_table(case: Case) -> None:
    parsed = parse(case.text, max_actions=case.max_actions)
    got = [(a.tool, a.args, a.body) for a in parsed.actions]
    assert got == case.actions
    assert all(a.key == "" for a in parsed.actions)
    assert parsed.done is case.done
    assert parsed.summary == case.summary
    assert parsed.parallel is case.parallel
    assert [(c.word, c.corrected_to) for c in parsed.corrections] == case.corrected
    if case.suggest is None:
        assert parsed.suggestions == []
    else:
        assert len(parsed.suggestions) == 1 and case.suggest in parsed.suggestions[0]
    if case.problem is None:
        assert parsed.problems == []
    else:
        assert any(case.problem in p for p in parsed.problems), parsed.problems
    if case.thinking is not None:
        assert parsed.thinking == case.thinking


@pytest.mark.parametrize("key", sorted(PROSE_ONLY))
def test_english_prose_stays_prose(key: str) -> None:
    text = CASES[key].text
    parsed = parse(text)
    assert parsed.actions == [] and not parsed.done
    assert parsed.thinking == text.strip()


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 40


def test_action_text_is_the_command_with_its_body() -> None:
    parsed = parse(f"Intro.\n- edit calc.py <<EOF\n{SR_BODY}EOF\nveiw x.py")
    assert parsed.actions[0].text == f"edit calc.py <<EOF\n{SR_BODY}EOF"
    assert parsed.actions[1].text == "veiw x.py"
    again = parse_command(parsed.actions[0].text)
    assert (again.tool, again.args, again.body) == ("edit", ["calc.py"], SR_BODY)


def test_correction_reports_line_number() -> None:
    parsed = parse("Looking.\n\ngerp foo src/")
    assert parsed.corrections == [Correction("gerp", "grep", 3)]


def test_done_body_joins_summary() -> None:
    parsed = parse("done Fixed it <<EOF\nsee calc.py\nEOF")
    assert parsed.done and parsed.summary == "Fixed it\nsee calc.py"


def test_heredoc_inside_bash_fence_stops_at_fence_end() -> None:
    parsed = parse("```bash\nwrite a.py <<EOF\nx = 1\n```\nAfter.")
    assert [(a.tool, a.body) for a in parsed.actions] == [("write", None)]
    assert "never closed" in parsed.actions[0].params["rejected"]
    assert parsed.thinking == ""  # nothing after the unclosed body is read


def test_unterminated_fenced_body() -> None:
    parsed = parse("write a.py\n```\nx = 1\n")
    assert parsed.actions[0].body is None
    assert "never closed" in parsed.actions[0].params["rejected"]


def test_prose_heredoc_body_is_not_read_as_commands() -> None:
    parsed = parse("Here is a script <<EOF\nrun rm -rf /\nEOF\nview x.py")
    assert [a.tool for a in parsed.actions] == ["view"]
    assert "run rm -rf /" in parsed.thinking


def test_prose_heredoc_inside_bash_fence_ends_with_the_fence() -> None:
    parsed = parse("```bash\nHere is a script <<EOF\nrun x\n```\nview y.py")
    assert [(a.tool, a.args) for a in parsed.actions] == [("view", ["y.py"])]
    assert parsed.thinking == "```bash\nHere is a script <<EOF\nrun x\n```"


def test_parallel_without_actions_is_false() -> None:
    assert parse("parallel\nNothing to do.").parallel is False


# --- parse_command


@pytest.mark.parametrize(
    ("text", "tool", "args", "body"),
    [
        ("view calc.py:1-5", "view", ["calc.py:1-5"], None),
        ("  $ run pytest -q  ", "run", ["pytest", "-q"], None),
        ("run\tpytest", "run", ["pytest"], None),
        ("View calc.py", "view", ["calc.py"], None),
        ("show me", "view", ["me"], None),
        ("done Fixed the bug.", "done", ["Fixed the bug."], None),
        ("done", "done", [], None),
        ("write a.txt <<EOF\nhi\nEOF\n", "write", ["a.txt"], "hi\n"),
        ("edit a.py\n```\nx\n```", "edit", ["a.py"], "x\n"),
    ],
)
def test_parse_command(text: str, tool: str, args: list[str], body: str | None) -> None:
    action = parse_command(text)
    assert (action.tool, action.args, action.body) == (tool, args, body)
    assert action.key == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty command"),
        ("   \n  ", "empty command"),
        ("veiw calc.py", "did you mean `view`?"),
        ("gerp foo", "did you mean `grep`?"),
        ("frobnicate x", "a command starts with one of: view"),
        ("parallel", "not a command"),
        ("view a.py\nview b.py", "one command expected; line 2"),
        ("run echo 'oops", "unbalanced quotes"),
    ],
)
def test_parse_command_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_command(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# --- to_decision


def test_to_decision_carries_everything() -> None:
    parsed = parse("Checking both.\nparallel\nview a.py\nview b.py\ndone Looked.")
    decision = to_decision(parsed)
    assert isinstance(decision, Decision)
    assert decision.thinking == "Checking both."
    assert [a.args for a in decision.actions] == [["a.py"], ["b.py"]]
    assert decision.parallel and decision.done and decision.summary == "Looked."
    decision.actions.append(Action("view"))
    assert len(parsed.actions) == 2


def test_to_decision_of_empty_reply() -> None:
    decision = to_decision(ParsedReply())
    assert decision.actions == [] and not decision.done and not decision.parallel


# --- the verb table and the generated docs

COMMANDS_MD_VERBS = {
    "view": {"show", "read", "cat", "open"},
    "skeleton": {"outline", "structure"},
    "grep": {"search", "find"},
    "edit": {"patch", "fix", "replace"},
    "write": {"create"},
    "run": {"sh", "exec"},
    "test": set(),
    "analyze": {"check", "lint"},
    "fetch": {"expand"},
    "note": set(),
    "remember": set(),
    "skill": set(),
    "plan": {"breakdown"},
    "ask": set(),
    "mcp": set(),
    "spawn": set(),
    "done": {"finish", "finished"},
}
SIDE_EFFECTS = {"edit", "write", "run", "test", "mcp", "spawn"}  # mcp: unless the server says
# read-only; spawn: a child may change the workspace


def test_verbs_match_commands_md() -> None:
    assert {v.name: set(v.aliases) for v in VERBS} == COMMANDS_MD_VERBS
    assert {v.name for v in VERBS if v.side_effect} == SIDE_EFFECTS


def test_verb_for() -> None:
    for verb in VERBS:
        for word in verb.words:
            assert verb_for(word) is verb
    assert verb_for("Show") is None
    assert verb_for("veiw") is None
    assert verb_for("parallel") is None


def test_command_reference_markdown_lists_every_word() -> None:
    ref = command_reference()
    for verb in VERBS:
        aliases = ", ".join(f"`{a}`" for a in verb.aliases) or "—"
        side = "yes" if verb.side_effect else "no"
        assert f"| `{verb.name}` | {aliases} |" in ref
        assert all(f"`{form}`" in ref for form in verb.forms)
        assert ref.count(f"| {verb.does} | {side} |") == 1
    assert "<<<<<<< SEARCH\nexact old text\n=======\nnew text\n>>>>>>> REPLACE" in ref


def test_command_reference_plain_lists_every_word() -> None:
    ref = command_reference(markdown=False)
    for verb in VERBS:
        also = f" (also: {', '.join(verb.aliases)})" if verb.aliases else ""
        assert f"\n{verb.name}{also} - " in ref
        assert all(f"    {form}\n" in ref for form in verb.forms)
    assert "| verb |" not in ref
    assert "fenced code block (```)" in ref
    assert "    >>>>>>> REPLACE" in ref


def test_system_prompt_section_lists_every_word() -> None:
    section = system_prompt_section()
    for verb in VERBS:
        line = next(ln for ln in section.splitlines() if ln.startswith(f"- {verb.forms[0]}"))
        if verb.aliases:
            assert f"aliases: {', '.join(verb.aliases)}" in line
        assert ("changes things" in line) is verb.side_effect
    for needed in ("<<EOF", "exactly EOF", "`parallel`", "`done SUMMARY`", "<<<<<<< SEARCH"):
        assert needed in section
