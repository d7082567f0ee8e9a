"""What each event says, in words: one function per message, typed on the event classes.

The renderers (`cli/render.py`) and `tasks show` decide where a message goes
and how it looks; the wording lives here, once. Every function takes the event
class it describes (never its dict form), so mypy catches a misspelt field.
No rich here: `tasks show` and the plain renderer stay light.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, assert_never

from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    ActionProgressed,
    ActionStarted,
    BatchEnded,
    BatchResumed,
    BatchStarted,
    CheckpointTaken,
    ChildCollected,
    ChildCreated,
    ContextCompacted,
    DecisionMade,
    Event,
    FallbackUsed,
    HarnessEvent,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    HookRan,
    InputReceived,
    ItemUpdated,
    LoopDetected,
    MemoryProposed,
    ModelReplied,
    ModelRequested,
    ModelRetried,
    Notice,
    ProcessStarted,
    RunEnded,
    RunStarted,
    StepStarted,
    TaskRewound,
    TaskSaved,
    TextDelta,
    ThinkingDelta,
    UnknownEvent,
    WaitingForInput,
    decode_events,
)
from normalize.redact import inert, inert_obj
from normalize.task import TaskStatus

MARKS = {"success": "✓", "error": "✗", "blocked": "⊘", "cancelled": "⊘", "interrupted": "?"}

ActionEvent = ActionStarted | ActionFinished | ActionInterrupted


class Span(NamedTuple):
    """A piece of a line and the style the live view gives it (plain output drops it)."""

    text: str
    style: str = ""


class Line(NamedTuple):
    """A one-line message; `warning` lines are marked `!`, the others `·`."""

    text: str
    warning: bool


def first_line(text: str, width: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def heredoc_marker(line: str) -> bool:
    marker = line.rfind("<<")
    return marker >= 0 and line[marker + 2:].strip().lstrip("-").strip("'\"").isidentifier()


def command_label(event: ActionEvent, width: int) -> str:
    """An action's command as one line: its first line, without a heredoc marker."""
    line = first_line(event.command or event.tool, 10_000)
    if heredoc_marker(line):
        line = line[: line.rfind("<<")].rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def mark(status: str) -> str:
    return MARKS.get(status, "·")


def outcome_mark(event: ActionFinished) -> str:
    """An action's mark: `–` for one that succeeded without doing its work (`skipped` in its
    data: `test` with no tests to run), never a `✓` for tests that did not run."""
    return "–" if event.status == "success" and event.data.get("skipped") else mark(event.status)


def plain(spans: Iterable[Span]) -> str:
    """The text of a styled line."""
    return "".join(span.text for span in spans)


# -- the run and its steps ------------------------------------------------------------------


def run_started(event: RunStarted, width: int) -> list[Span]:
    """`task abc12345 started: the goal (llm)`."""
    how = "resumed" if event.resumed else "started"
    return [Span("task ", "bold"), Span(event.task_id, "bold cyan"),
            Span(f" {how}: {first_line(event.goal, width)} "), Span(f"({event.driver})", "dim")]


def step_label(event: StepStarted) -> str:
    """`step 2/5: tests`, or `state fixing`."""
    if event.state:
        return f"state {event.state}"
    if event.total:
        return f"step {event.index}/{event.total}: {event.name}"
    return f"step {event.name}"


def step_line(event: StepStarted) -> str:
    return f"→ {step_label(event)}"


def stats(event: RunEnded, resumed: bool = False) -> list[str]:
    """The figures of a finished run: turns, actions, time, tokens, cost.

    Turns, actions, tokens and cost are the task's; the time is this run's: after a
    resume, when the two differ, each says which it is.
    """
    counts = f"{plural(event.turns, 'turn')} · {plural(event.actions, 'action')}"
    took = f"{event.duration:.1f}s"
    parts = [f"{counts} in all", f"{took} this run"] if resumed else [counts, took]
    if event.input_tokens or event.output_tokens:
        parts.append(f"{event.input_tokens:,} in / {event.output_tokens:,} out tokens")
    if event.cost_usd:
        parts.append(f"${event.cost_usd:.4f}")
    return parts


def error_text(error: str) -> str:
    return f"error: {error}"


def pending_ask(event: ActionFinished) -> bool:
    """An `ask` that left its question pending: the waiting line shows it, once."""
    return event.tool == "ask" and event.status == "success" and not event.preview.strip()


def ending_summary(event: RunEnded) -> str:
    """The summary a run's ending shows; a waiting run's question is on screen already."""
    return "" if event.status == TaskStatus.WAITING else event.summary


def summary_line(event: RunEnded, resumed: bool = False) -> str:
    """`task abc12345 done · 2 turns · …`, then the summary (whole: a report is its lines)
    and the error's first line."""
    line = f"task {event.task_id} " + " · ".join([status_word(event.status),
                                                  *stats(event, resumed)])
    if ending_summary(event):
        line += "".join(f"\n  {row}" for row in event.summary.strip().splitlines())
    if event.error:
        line += f"\n  {error_text(first_line(event.error, 200))}"
    return line


def result_lines(result: object) -> list[str]:
    """A structured result as a person reads it: findings (`path`, `line`, `severity`,
    `message`) as `path:line: severity: message` lines under the object's other fields,
    anything else as indented JSON. Inert: every string's control characters shown."""
    import json

    shown = inert_obj(result)
    findings = shown.get("findings") if isinstance(shown, dict) else None
    if not (isinstance(shown, dict) and isinstance(findings, list)
            and all(isinstance(f, dict) and "message" in f for f in findings)):
        return json.dumps(shown, indent=2, ensure_ascii=False).splitlines()
    lines = [f"{key}: {value if isinstance(value, str) else json.dumps(value)}"
             for key, value in shown.items() if key != "findings"]
    for found in findings:
        place = ":".join(str(found[k]) for k in ("path", "line") if found.get(k) is not None)
        words = [str(found[k]) for k in ("severity", "message") if found.get(k) is not None]
        lines.append(": ".join([place, *words] if place else words))
    return lines if findings else [*lines, "findings: none"]


def ending_title(event: RunEnded) -> str:
    """`✓ done`, or `■ failed`: the head of the summary panel."""
    mark = MARKS["success"] if event.status == TaskStatus.DONE else "■"
    return f"{mark} {status_word(event.status)}"


def status_word(status: str) -> str:
    """A task status as words: `limit reached`, not `limit_reached`."""
    return status.replace("_", " ")


def changes_hint(task_id: str) -> str:
    """What to do with a run's changes, under its changed files."""
    return f"see them: normalize diff {task_id} · take them back: normalize undo {task_id}"


# -- actions ---------------------------------------------------------------------------------


def action_outcome(event: ActionFinished, width: int) -> str:
    """`✓ view a.py  (0.01s)`: the mark, the command and how long it took."""
    return f"{outcome_mark(event)} {command_label(event, width)}  ({event.duration:.2f}s)"


def action_change(event: ActionFinished) -> str | None:
    """What a successful action did, in a few words: `+3 -1`, or its output's first line."""
    if "added" in event.data and "removed" in event.data:
        return f"+{event.data['added']} -{event.data['removed']}"
    if event.tool == "view" and event.data.get("kind") in ("outline", "head"):
        # `… big.py: 1,401 lines; showing the outline. Use view …`: the model's advice goes
        return first_line(output_head(event.preview).removeprefix("… ").split(". Use ")[0], 60)
    if event.tool not in ("edit", "write") and event.preview:
        return first_line(output_head(event.preview), 40)
    return None


def output_head(preview: str) -> str:
    """A successful output's own first line, past a preview's `errors (…)` section."""
    lines = preview.strip().splitlines()
    if lines and lines[0].startswith("errors ("):  # a heading, not the output: past it or none
        lines = lines[lines.index("first lines:") + 1:] if "first lines:" in lines else []
    return lines[0] if lines else ""


def result_body(text: str, rows: int, cache_id: str | None) -> list[str]:
    """A result as a person at the prompt reads it: whole up to `rows` lines, then cut.

    A cut body ends with how much is left and the `fetch` that shows it all.
    """
    lines = text.rstrip("\n").splitlines()
    rows = max(rows, 3)
    if len(lines) <= rows:
        return lines
    shown = lines[: rows - 1]
    where = f"`fetch {cache_id}` shows all" if cache_id else "not kept"
    return [*shown, f"… {len(lines) - len(shown)} more lines — {where}"]


def network_line(event: ActionFinished) -> str | None:
    """`network: pypi.org (allowed), evil.test (refused)`: the hosts a program asked for."""
    from normalize.sandbox.hosts import hosts_line

    records = event.data.get("network")
    return hosts_line(records) if isinstance(records, list) else None


FAILURE_LINES = 14
BARE_EXIT = re.compile(r"exit status -?\d+|killed by \w+|timed out after [\d.]+ s")
"""The lines of an error a view shows under the failed action (the rest: `tasks show --full`)."""


def action_failure(event: ActionFinished, width: int = 100) -> str:
    """Why an action did not succeed: its error whole (up to `FAILURE_LINES` lines, which
    keeps an edit's closest lines and advice), else its output's first line, else its status."""
    error = (event.error or "").strip()
    if not error:
        return first_line(event.preview, width) or event.status
    lines = error.splitlines()
    if BARE_EXIT.fullmatch(error):  # a program's status alone: what it said last says why
        said = [line for line in event.preview.rstrip().splitlines() if line.strip()]
        lines += said[-(FAILURE_LINES - 1):]
    if len(lines) > FAILURE_LINES:
        more = len(lines) - FAILURE_LINES + 1
        lines = [*lines[:FAILURE_LINES - 1], f"… {more} more lines (normalize tasks show "
                                              f"{event.task_id[:8]} --full)"]
    return "\n".join(lines)


def diff_lines(event: ActionFinished, limit: int) -> list[str]:
    """A successful edit's (or write's) unified diff, at most `limit` lines; [] for others."""
    if event.tool not in ("edit", "write") or event.status != "success":
        return []
    lines = event.preview.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("--- ")), None)
    if start is None:
        return []
    shown = lines[start:start + limit]
    more = len(lines) - start - len(shown)
    return [*shown, f"… {more} more lines"] if more > 0 else shown


def said_by_its_result(event: ActionInterrupted) -> bool:
    """Whether an `interrupted` result follows at once and says it all: a side effect cut
    short, its outcome unknown (its line would say it twice)."""
    return not event.read_only and not event.rerun


def interrupted_line(event: ActionInterrupted, width: int) -> str:
    what = "runs again" if event.rerun else "outcome unknown"
    return f"? {command_label(event, width)}: interrupted, {what}"


def waiting_line(event: WaitingForInput) -> str:
    """The plain log's line for a question (the live view shows `question_line`, in colour)."""
    return f"? waiting for an answer: {event.question}"


def unknown_line(event: UnknownEvent) -> str:
    """An event of a newer normalize, named (its fields are kept in the journal)."""
    return f"{first_line(event.type, 60)}: an event this version of normalize does not know"


def question_line(event: WaitingForInput) -> str:
    return f"? {event.question}"


ANSWER_LABELS = {"typed": "sent to the model: ", "follow_up": "follow-up: "}
"""How each kind of input reads after its `↳` (an answer to a question has no label)."""


def answer_line(event: InputReceived, width: int = 100) -> str:
    """`  ↳ yes`, `  ↳ sent to the model: …` (a typed line), `  ↳ follow-up: …`."""
    return f"  ↳ {ANSWER_LABELS.get(event.kind, '')}{first_line(event.answer, width)}"


COUNT_ORDER = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")


def progress_lines(event: ActionProgressed, width: int) -> list[str]:
    """Under a running program's spinner: a test run's counts so far, then its last lines."""
    counts = [f"{event.counts[name]} {name}" for name in COUNT_ORDER if event.counts.get(name)]
    out = [f"  {', '.join(counts)} so far"] if counts else []
    out.extend(f"  │ {line}"[:max(width - 1, 10)] for line in event.tail)
    return out


def message(event: Event) -> Line | None:
    """The one-liners both views show the same way (notices, retries, fallbacks, loops)."""
    match event:
        case Notice(level="error"):
            return None  # the run's ending reports it
        case Notice():
            return Line(f"{'!' if event.level == 'warning' else '·'} "  # whole: the view wraps
                        f"{first_line(event.message, 2000)}", event.level == "warning")
        case FallbackUsed():
            return Line(f"! falling back from {event.from_model} to {event.to_model}: "
                        f"{event.reason}", True)
        case ModelRetried():
            return Line(f"! model call failed ({event.reason}); retry {event.attempt} in "
                        f"{event.delay:.1f}s", True)
        case LoopDetected():
            return Line(f"! loop detected: {first_line(event.command, 80)} repeated "
                        f"{event.repeats}×", True)
        case ContextCompacted():
            return Line(f"· context compacted: {event.before_chars:,} → {event.after_chars:,} "
                        f"characters ({event.results_compacted} results)", False)
        case HarnessToolCalled():
            return Line(f"· {event.harness} ran {event.tool} {harness_input(event.input)}",
                        False)
        case HarnessToolFinished(ok=False):
            return Line(f"! {event.harness}'s call failed: {first_line(event.output, 100)}",
                        True)
        case MemoryProposed():
            return Line(memory_lines(event), False)
    return None


def memory_lines(event: MemoryProposed) -> str:
    """What a finished task proposed to remember: one line each (never written silently)."""
    lines = []
    for entry in event.entries:
        where = "remembered" if entry.get("state") == "accepted" else "proposed to the inbox"
        lines.append(f"· memory {where} ({entry.get('source')}, #{entry.get('id')}): "
                     f"{first_line(str(entry.get('text', '')), 200)}")
        why = str(entry.get("why", ""))
        if "AGENTS.md" in why:  # a lesson that may contradict the project's instructions
            lines.append(f"  ! {first_line(why.rsplit('; ', 1)[-1], 200)}")
    lines += [f"· memory left out: {first_line(why, 200)}" for why in event.dropped]
    if any(e.get("state") == "inbox" for e in event.entries):
        lines.append("· review with: normalize memory inbox")
    return "\n".join(lines)


def harness_input(given: dict[str, Any]) -> str:
    """A harness tool call's input in one short line: its command or path, else its JSON."""
    for key in ("command", "cmd", "file_path", "path", "pattern", "query"):
        value = given.get(key)
        if isinstance(value, str) and value:
            return first_line(value, 90)
    import json

    return first_line(json.dumps(given, ensure_ascii=False), 90)


def batch_line(event: BatchStarted | BatchResumed | ItemUpdated | BatchEnded) -> str:
    """A batch's line: its start, an item submitted or ended, its end."""
    match event:
        case BatchStarted():
            return batch_start_line(event.batch, event.items, event.executor)
        case BatchResumed():
            return f"batch {event.batch}: resumed ({event.items} items)"
        case ItemUpdated():
            return item_line(event)
        case BatchEnded():
            counts = ", ".join(f"{n} {s}" for s, n in sorted(event.counts.items()))
            cost = f", ${event.cost_usd:.4f}" if event.cost_usd else ""
            return f"batch {event.batch} {event.status}: {counts}{cost}"


def batch_start_line(batch: str, items: int, executor: str) -> str:
    """A batch's first line, which names it: `batch ID: N items (EXECUTOR)`."""
    return f"batch {batch}: {items} items ({executor})"


def item_line(event: ItemUpdated) -> str:
    """`item 3 (word3) 1a2b3c4d done`: which item (its `line`, else its first field), its
    task and status; its cost when it spent any, its attempt when it is not the first."""
    item = event.item
    shown = item.get("line", next(iter(item.values()), "")) if item else ""
    label = inert(" ".join(str(shown).split())[:40]) if shown not in (None, "") else ""
    words = [f"item {event.position}" + (f" ({label})" if label else ""), event.item_task_id,
             event.status]
    words += [f"${event.cost_usd:.4f}"] if event.cost_usd else []
    words += [f"attempt {event.attempts}"] if event.attempts > 1 else []
    return " ".join(words) + (f" ({event.note})" if event.note else "")


def describe(event: Event) -> str | None:
    """The plain renderer's line(s) for an event, or None for noise (every kind named)."""
    match event:
        case RunStarted():
            return plain(run_started(event, 100))
        case StepStarted():
            return step_line(event)
        case ActionFinished() if pending_ask(event):
            return None
        case ActionFinished():
            return _finished_line(event)
        case ActionInterrupted() if said_by_its_result(event):
            return None
        case ActionInterrupted():
            return f"  {interrupted_line(event, 80)}"
        case WaitingForInput():
            return waiting_line(event)
        case InputReceived():
            return answer_line(event)
        case DecisionMade():
            return f"  {first_line(event.thinking, 120)}" if event.thinking else None
        case RunEnded():
            return summary_line(event)
        case BatchStarted() | BatchResumed() | ItemUpdated() | BatchEnded():
            return batch_line(event)
        case _:
            return _aside(event)


Aside = (Notice | FallbackUsed | ModelRetried | LoopDetected | HarnessToolCalled
         | HarnessToolFinished | MemoryProposed | ContextCompacted | HarnessSession
         | HarnessEvent | ActionStarted | ProcessStarted | ChildCreated | ChildCollected
         | TaskSaved | CheckpointTaken | TaskRewound | ModelRequested | TextDelta
         | ThinkingDelta | ModelReplied | HookRan | UnknownEvent | ActionProgressed)
"""The events the plain renderer says aside (a notice's message) or not at all."""


def _aside(event: Aside) -> str | None:
    """A notice's message, indented; None for what only the live view shows."""
    match event:
        case (Notice() | FallbackUsed() | ModelRetried() | LoopDetected() | HarnessToolCalled()
              | HarnessToolFinished() | MemoryProposed()):
            line = message(event)
            return None if line is None else "  " + line.text.replace("\n", "\n  ")
        case (ContextCompacted()  # the live view's footnote; too chatty for a log
              | HarnessSession() | HarnessEvent()
              | ActionStarted() | ProcessStarted() | ChildCreated() | ChildCollected()
              | TaskSaved() | CheckpointTaken() | TaskRewound() | ModelRequested()
              | TextDelta() | ThinkingDelta() | ModelReplied() | HookRan() | UnknownEvent()
              | ActionProgressed()):  # the live view's, under its spinner
            return None
        case _:
            assert_never(event)


def _finished_line(event: ActionFinished) -> str:
    """The plain renderer's line for a finished action: outcome, change or failure, hosts."""
    outcome = f"  {action_outcome(event, 80)}"
    change = action_change(event) if event.status == "success" else None
    if change:  # as the live view shows it: `+3 -1`, a test's counts, the first line
        outcome += f"  {change}"
    if event.status != "success" and event.error:
        reason = action_failure(event).replace("\n", "\n      ")
        outcome += f"\n      {reason}"
    hosts = network_line(event)
    return f"{outcome}\n      {hosts}" if hosts else outcome


# -- a task's journal, read back -------------------------------------------------------------


def journal_events(raw: Iterable[dict[str, Any]], *, unknown: bool = False
                   ) -> Iterator[Event]:
    """Events from a journal's dicts, their text inert (a journal written before normalize
    made it so may hold escapes); a kind this version does not know is skipped, or kept as
    an `UnknownEvent` with `unknown` (`tasks show` names it)."""
    events = decode_events(inert_obj(data) for data in raw)
    return events if unknown else (e for e in events if not isinstance(e, UnknownEvent))


SHOW_LINES = 8  # lines of each step's output `tasks show` prints (`--full`: all of it)


def step_output(event: ActionFinished, *, full_text: str | None = None,
                lines: int | None = SHOW_LINES) -> list[str]:
    """An action's output under its line in `tasks show`: its error first, then the output."""
    out = [f"      {error_text(first_line(event.error, 200))}"] if event.error else []
    text = full_text if full_text is not None else event.preview
    body = text.rstrip("\n").splitlines()
    said = (event.error or "").strip().splitlines()
    if said and body[:len(said)] == said:  # the output opens with the error: said once
        body = body[len(said):]
    if lines is not None and len(body) > lines:
        more = len(body) - lines + 1
        where = f" — `normalize tasks show {event.task_id} --full`" if event.cache_id else ""
        body = [*body[: lines - 1], f"… {more} more lines{where}"]
    return [*out, *(f"      {line}" for line in body)]


def history(events: Iterable[Event],
            output: Callable[[ActionFinished], list[str]] | None = None,
            net: dict[str, list[int]] | None = None) -> list[str]:
    """The steps of `tasks show`: steps, actions (and `output` under each), inputs, resumptions,
    each workspace step numbered `#N` as `diff`, `undo --to` and `--rewind` count them; then
    the files the task changed, with their `+/-` lines (`net`, as `diff --stat` counts them,
    when known; else the steps' summed)."""
    out: list[str] = []
    actions = 0
    checkpoints: list[CheckpointTaken] = []
    rewound: list[tuple[int, int]] = []
    at_key: dict[str, int] = {}  # an action's key -> its line, for its step's number
    run_line = rewind_line = -1
    for event in events:
        match event:
            case ActionFinished():
                actions += 1
                at_key[event.key] = len(out)
                out.extend(_action_lines(event, output))
            case RunStarted(resumed=True):
                run_line = len(out)
                out.append("  ↻ resumed")
            case CheckpointTaken():
                checkpoints.append(event)
                number_step(out, event, at_key.get(event.key, -1), run_line, rewind_line)
            case TaskRewound():
                rewound.append((event.after_seq, event.seq))
                rewind_line = len(out)
                out.append(f"  ↺ rewound to step {event.step}: the actions above it since "
                           "were undone")
            case _:
                out.extend(_event_lines(event))
    if not actions:
        out.append("  (no actions yet)")
    totals = _kept_changes(checkpoints, rewound)
    return [*out, *step_legend(checkpoints), *changed_files(totals if net is None else net)]


def _event_lines(event: Event) -> list[str]:
    """The lines `tasks show` gives an event that only adds lines (none for the rest)."""
    match event:
        case StepStarted():
            return [f"  {step_line(event)}"]
        case InputReceived():
            return [answer_line(event, 200)]
        case HarnessToolCalled():  # a harness's own calls, before its turn's line
            return [f"    · {event.harness} ran {event.tool} {harness_input(event.input)}"]
        case HarnessToolFinished(ok=False):
            return [f"      ! failed: {first_line(event.output, 100)}"]
        case DecisionMade() if event.thinking.strip():  # the model's prose, as the run showed
            return [f"  {first_line(event.thinking, 120)}"]
        case UnknownEvent():
            return [f"  · {unknown_line(event)}"]
        case MemoryProposed():
            return [f"  {line}" for line in memory_lines(event).splitlines()]
        case _:
            return []


def _kept_changes(checkpoints: list[CheckpointTaken],
                  rewound: list[tuple[int, int]]) -> dict[str, list[int]]:
    """The `+/-` lines per file of the checkpoints no rewind undid, summed."""
    totals: dict[str, list[int]] = {}
    for checkpoint in checkpoints:
        if not any(lo < checkpoint.seq < hi for lo, hi in rewound):
            add_changes(totals, checkpoint)
    return totals


def _action_lines(event: ActionFinished,
                  output: Callable[[ActionFinished], list[str]] | None) -> list[str]:
    """An action's lines in `tasks show`: its outcome, its hosts, and its output (`output`)."""
    hosts = network_line(event)
    return [f"  {action_outcome(event, 70)}", *([f"      {hosts}"] if hosts else []),
            *(output(event) if output is not None else [])]


def number_step(out: list[str], event: CheckpointTaken, action: int, run: int,
                rewind: int) -> None:
    """Mark the line a workspace step belongs to with `#N` (a line of its own if it has none)."""
    at = {"action": action, "resume": run, "rewind": rewind}.get(event.kind, -1)
    if at >= 0:
        out[at] += f"  #{event.step}"
    elif event.kind == "start":
        out.append(f"  ▶ started  #{event.step}")
    elif event.kind == "undo":
        out.append(f"  ↶ undo: {plural(event.files, 'file')} put back  #{event.step}")


def step_legend(checkpoints: list[CheckpointTaken]) -> list[str]:
    """How to use the `#N` numbers, once the task has steps beyond its start."""
    if not any(c.step for c in checkpoints):
        return []
    task = checkpoints[-1].task_id
    return [f"  (#N is a step: `normalize diff {task} N` shows it; "
            f"`normalize undo {task} --to N` goes back to it)"]


def plural(count: int, noun: str) -> str:
    """`1 file`, `2 files`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def add_changes(totals: dict[str, list[int]], event: CheckpointTaken) -> None:
    """Add a checkpoint's `+/-` lines per file to `totals` (the task's own steps only; a
    rewind's changes cancel the rewound steps', which are left out too)."""
    if event.kind not in ("action", "undo"):
        return
    for path, (added, removed) in event.changes.items():
        entry = totals.setdefault(path, [0, 0])
        entry[0] += max(added, 0)
        entry[1] += max(removed, 0)


def changed_files(totals: dict[str, list[int]], limit: int = 20) -> list[str]:
    """`files changed:` and one `  +3 -1  calc.py` line per file (`normalize diff` has more)."""
    if not totals:
        return []
    lines = ["files changed:"] + [f"  +{a} -{r}  {path}"
                                  for path, (a, r) in list(totals.items())[:limit]]
    if len(totals) > limit:
        lines.append(f"  … and {len(totals) - limit} more (see `normalize diff`)")
    return lines


def recent_actions(events: Iterable[Event], limit: int = 5) -> list[str]:
    """The last few actions, marked and named, for the person taking a task over."""
    finished = [e for e in events if isinstance(e, ActionFinished)]
    return [f"  {outcome_mark(e)} {command_label(e, 70)}" for e in finished[-limit:]]
