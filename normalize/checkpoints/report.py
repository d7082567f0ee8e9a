"""A task's report: one self-contained HTML file a person can open anywhere.

No script, no network, no external asset: the styles are inline, long outputs
fold with `<details>`, and every piece of text goes through `html.escape`,
so a file's content (or a model's reply) shows as text and never as markup.
Made from the journal (the shown, redacted record) and the workspace
checkpoints (the diffs per step); the diffs and the task's own fields are
redacted here, as every shown output is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html import escape
from typing import Any, assert_never

from normalize.errors import NormalizeError
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
from normalize.redact import inert
from normalize.sandbox.hosts import hosts_line
from normalize.store import TaskStore
from normalize.task import Task

FOLD_LINES = 12
MAX_DIFF = 200_000
STYLE = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;
max-width:70rem;padding:0 1rem;color:#1d2330;background:#fbfbfd}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #dde}
pre{background:#f2f3f7;padding:.6rem;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font:13px/1.35 ui-monospace,Menlo,Consolas,monospace;margin:.3rem 0}
code{font:13px ui-monospace,Menlo,Consolas,monospace}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{color:#667}
.turn{border:1px solid #dde;border-radius:6px;padding:.5rem 1rem;margin:.8rem 0;background:#fff}
.turn h3{font-size:1rem;margin:.2rem 0}.meta{color:#667;font-size:.85rem;font-weight:normal}
.prose{white-space:pre-wrap}.rewound{opacity:.55;border-style:dashed}
.status-success{color:#17663a}.status-error,.status-blocked,.status-interrupted{color:#b3261e}
.status-cancelled{color:#7a5b00}.problem{background:#fdeceb;border-left:4px solid #b3261e;
padding:.3rem .8rem;margin:.3rem 0}
.add{color:#17663a;background:#e9f7ee}.del{color:#b3261e;background:#fdeceb}
.hunk{color:#0b5cad}.file{font-weight:bold}
table{border-collapse:collapse}td,th{padding:.15rem .8rem;text-align:left}
td.num{text-align:right;font-family:ui-monospace,monospace}
.wait{background:#eef4ff;padding:.3rem .8rem;border-left:4px solid #0b5cad}
"""


@dataclass
class Turn:
    """The events of one model turn (or driver decision) and what its actions did."""

    turn: int
    started: float = 0.0
    ended: float = 0.0
    prose: list[str] = field(default_factory=list)
    actions: list[ActionFinished] = field(default_factory=list)
    checkpoints: list[CheckpointTaken] = field(default_factory=list)
    other: list[Event] = field(default_factory=list)
    tools: list[HarnessToolCalled | HarnessToolFinished] = field(default_factory=list)
    """A harness's own tool calls in this turn, and what each gave back."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    rewound: bool = False
    first_seq: int = 0


def _e(text: Any) -> str:
    """`text` as HTML: inert (control characters shown, not kept), then escaped."""
    return escape(inert(str(text)), quote=True)


def _events(store: TaskStore, task: Task, redact: Callable[[Any], Any]) -> list[Event]:
    return list(decode_events(redact(data) for data in store.events(task.id)))


def group_turns(events: Iterable[Event]) -> tuple[list[Turn], list[Event]]:
    """The turns in journal order, and the run-level events (starts, ends, rewinds)."""
    events = list(events)
    rewound: list[tuple[int, int]] = [(e.after_seq, e.seq) for e in events
                                      if isinstance(e, TaskRewound)]
    turns: list[Turn] = []
    runs: list[Event] = []
    current: Turn | None = None
    tools: list[HarnessToolCalled | HarnessToolFinished] = []

    def turn_for(number: int, ts: float) -> Turn:
        nonlocal current
        if current is None or current.turn != number:
            current = Turn(number, started=ts, ended=ts, first_seq=seq)
            turns.append(current)
        return current

    for event in events:
        seq = event.seq
        is_rewound = any(lo < seq < hi for lo, hi in rewound)
        match event:
            case RunStarted() | RunEnded() | TaskRewound():
                runs.append(event)
                if current is not None:
                    current.ended = max(current.ended, event.ts)
                current = None
                continue
            case ModelRequested():
                turn = turn_for(event.turn, event.ts)
            case ModelReplied():
                turn = turn_for(event.turn, event.ts)
                turn.input_tokens += event.input_tokens
                turn.output_tokens += event.output_tokens
                turn.cost_usd += event.cost_usd
                turn.model = event.model
            case DecisionMade():
                turn = turn_for(event.turn, event.ts)
                _add_decision(turn, event)
            case ActionFinished():
                turn = turn_for(event.turn, event.ts)
                turn.actions.append(event)
                turn.tools += tools  # a harness's calls come before its turn's action ends
                tools = []
            case CheckpointTaken() if event.kind in ("action", "undo", "rewind"):
                turn = turn_for(event.turn, event.ts)
                turn.checkpoints.append(event)
            case (WaitingForInput() | InputReceived() | Notice() | UnknownEvent()
                  | MemoryProposed()):
                if current is None:
                    runs.append(event)
                    continue
                turn = current
                turn.other.append(event)
            case (CheckpointTaken() | StepStarted() | ActionStarted() | ProcessStarted()
                  | ActionInterrupted() | ChildCreated() | ChildCollected() | TaskSaved()
                  | TextDelta() | ThinkingDelta() | ModelRetried() | FallbackUsed()
                  | LoopDetected() | ContextCompacted() | HookRan() | ActionProgressed()
                  | HarnessSession() | HarnessEvent()
                  | BatchStarted() | BatchResumed() | ItemUpdated() | BatchEnded()):
                continue  # the turn's actions and tokens say enough
            case HarnessToolCalled() | HarnessToolFinished():
                tools.append(event)
                continue
            case _:
                assert_never(event)
        turn.ended = max(turn.ended, event.ts)
        turn.rewound = turn.rewound or is_rewound
    return turns, runs


def _add_decision(turn: Turn, event: DecisionMade) -> None:
    """A decision's prose in its turn: the model's thinking, and `done` with its summary."""
    if event.thinking.strip():
        turn.prose.append(event.thinking)
    if event.done:
        turn.prose.append(f"done: {event.summary}" if event.summary else "done")


def _output(text: str, label: str, open_: bool = False) -> str:
    lines = text.splitlines()
    if not text.strip():
        return ""
    if len(lines) <= FOLD_LINES and len(text) < 1500:
        return f"<pre>{_e(text)}</pre>"
    return (f"<details{' open' if open_ else ''}><summary>{_e(label)} ({len(lines)} lines)"
            f"</summary><pre>{_e(text)}</pre></details>")


def diff_html(patch: str) -> str:
    """A unified diff as a `<pre>` with a class per line kind."""
    if len(patch) > MAX_DIFF:
        patch = patch[:MAX_DIFF] + "\n… (cut: see `normalize diff`)\n"
    rows = []
    for line in patch.splitlines():
        kind = ("file" if line.startswith(("diff --git", "+++ ", "--- ")) else
                "add" if line.startswith("+") else "del" if line.startswith("-") else
                "hunk" if line.startswith("@@") else "")
        rows.append(f'<span class="{kind}">{_e(line)}</span>' if kind else _e(line))
    return '<pre class="diff">' + "\n".join(rows) + "</pre>"


def _step_diffs(store: TaskStore, task: Task) -> dict[int, str]:
    try:
        from normalize.checkpoints.changes import TaskChanges

        changes = TaskChanges.open(store, task)
        return {step.number: changes.patch(step.number) for step in changes.steps
                if step.by_task and step.files}
    except NormalizeError:
        return {}


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def render_report(store: TaskStore, task: Task, published: str = "") -> str:
    """The whole report, as one HTML document (redacted: it is shown, like the journal).

    `published` is the task's net change as its batch published it: shown whole where the
    store read holds no checkpoints (a batch's store pulled from a URL), so no step diffs."""
    from normalize.checkpoints.changes import readable_patch
    from normalize.redact import Redactor

    redactor = Redactor.for_workspace(task.workspace)
    events = _events(store, task, redactor.redact_obj)  # again: a store may not redact
    turns, runs = group_turns(events)
    diffs = {step: redactor.redact(readable_patch(patch))
             for step, patch in _step_diffs(store, task).items()}
    task = Task.from_dict(redactor.redact_obj(task.to_dict()))  # the task file is exact
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>normalize task {_e(task.id)}</title><style>{STYLE}</style></head><body>",
           f'<h1>Task <code>{_e(task.id)}</code> · <span class="status-'
           f'{"success" if task.status.value == "done" else "error"}">'
           f"{_e(task.status.value)}</span></h1>"]
    usage = task.usage
    facts = [("goal", task.goal), ("driver", task.driver), ("workspace", task.workspace),
             ("turns", task.turn), ("actions", task.actions_run),
             ("elapsed", f"{task.elapsed:.1f}s"),
             ("tokens", f"{usage.input_tokens:,} in / {usage.output_tokens:,} out"),
             ("cost", f"${usage.cost_usd:.4f}" + (f" (+ ${usage.children_cost_usd:.4f} by "
                                                   "sub-tasks)" if usage.children_cost_usd
                                                   else "")),
             ("created", _when(task.created_at))]
    if task.workflow:
        facts.insert(3, ("workflow", task.workflow))
    out.append("<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
               + "</dl>")
    if task.parent:
        out.append(f'<p>A sub-task of <a href="report-{_e(task.parent)}.html">'
                   f"<code>{_e(task.parent)}</code></a>.</p>")
    out += _problems(turns, task)
    out += _children(store, task, events, redactor.redact)
    out += _changed_files(turns)
    if published and not diffs:
        out += ["<h2>Change</h2>", "<p>The net change, as the batch published it (this copy of "
                "the store has no checkpoints: no diff per step).</p>",
                diff_html(redactor.redact(readable_patch(published)))]
    out.append("<h2>Timeline</h2>")
    runs_by_seq = sorted(runs, key=lambda e: e.seq)
    items: list[tuple[int, str]] = [(e.seq, _run_event(e)) for e in runs_by_seq]
    items += [(turn.first_seq, _turn(turn, diffs)) for turn in turns]
    ordered = sorted(items, key=lambda item: item[0])
    out += [html for _, html in ordered if html]
    out.append(_ending(task, runs_by_seq))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _children(store: TaskStore, task: Task, events: list[Event],
              redact: Callable[[str], str]) -> list[str]:
    """The sub-tasks side by side, each linked to its own report (written beside this one).

    Best-of-N attempts add their pick command's exit and diff stat, and which was picked.
    """
    if not task.children:
        return []
    collected = {e.child_id: e for e in events if isinstance(e, ChildCollected)}
    rows = []
    for child_id in task.children:
        try:
            child = store.load(child_id, with_config=False)
        except NormalizeError:
            rows.append(f"<tr><td><code>{_e(child_id)}</code></td><td colspan=6>unreadable"
                        "</td></tr>")
            continue
        seen = collected.get(child_id)
        pick = "" if seen is None or seen.pick_exit is None else f"exit {seen.pick_exit}"
        stat = (seen.diff_stat.splitlines() or [""])[-1].strip() if seen else ""
        mark = ("picked" if seen.picked else "applied" if seen.applied else "") if seen else ""
        rows.append(f'<tr><td><a href="report-{_e(child.id)}.html"><code>{_e(child.id)}</code>'
                    f'</a></td><td>{_e(f"#{seen.attempt}" if seen and seen.attempt else "")}'
                    f"</td><td>{_e(child.status.value)}</td><td>{_e(pick)}</td>"
                    f"<td>{_e(redact(stat))}</td><td>${child.usage.total_cost_usd:.4f}</td>"
                    f"<td>{_e(mark)}</td><td>{_e(_first(redact(child.goal), 80))}</td></tr>")
    return ["<h2>Sub-tasks</h2>", "<table><tr><th>task</th><th>attempt</th><th>status</th>"
            "<th>pick</th><th>diff</th><th>cost</th><th>picked</th><th>goal</th></tr>", *rows,
            "</table>"]


def _problems(turns: list[Turn], task: Task) -> list[str]:
    failed = [(t, a) for t in turns for a in t.actions if a.status != "success"]
    if not failed and not task.error:
        return []
    out = ["<h2>Errors first</h2>"]
    if task.error:
        out.append(f'<div class="problem"><strong>the task ended with an error:</strong> '
                   f"<pre>{_e(task.error)}</pre></div>")
    for turn, action in failed:
        out.append(f'<div class="problem">turn {turn.turn}: <a href="#a-{_e(action.seq)}">'
                   f"<code>{_e(_first(action.command or action.tool))}</code></a> "
                   f'<span class="status-{_e(action.status)}">{_e(action.status)}</span>'
                   f"{'' if not action.error else ': ' + _e(_first(action.error, 300))}"
                   f"{' (rewound)' if turn.rewound else ''}</div>")
    return out


def _changed_files(turns: list[Turn]) -> list[str]:
    totals: dict[str, list[int]] = {}
    for turn in turns:
        if turn.rewound:
            continue
        for checkpoint in turn.checkpoints:
            if checkpoint.kind == "rewind":
                continue  # it cancels the rewound steps, which are left out
            for path, (added, removed) in checkpoint.changes.items():
                entry = totals.setdefault(path, [0, 0])
                entry[0] += max(added, 0)
                entry[1] += max(removed, 0)
    if not totals:
        return []
    rows = "".join(f'<tr><td><code>{_e(p)}</code></td><td class="num add">+{a}</td>'
                   f'<td class="num del">-{r}</td></tr>' for p, (a, r) in totals.items())
    return ["<h2>Files changed</h2>", f"<table>{rows}</table>"]


def _first(text: str, width: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


INPUT_LABELS = {"typed": "typed while the model worked", "follow_up": "follow-up instruction"}


def _run_event(event: Event) -> str:
    match event:
        case RunStarted():
            how = "resumed" if event.resumed else "started"
            return (f'<p class="meta">▶ run {how} at {_e(_when(event.ts))} '
                    f"({_e(event.driver)}, turn {event.turn})</p>")
        case RunEnded():
            return (f'<p class="meta">■ run ended: <span class="status-'
                    f'{"success" if event.status == "done" else "error"}">{_e(event.status)}'
                    f"</span> after {event.duration:.1f}s</p>")
        case TaskRewound():
            return (f'<p class="wait">↺ rewound to step {event.step} (turn {event.turn}); '
                    f"the dimmed turns before this were undone: "
                    f"{_e(', '.join(event.files) or 'no files')}</p>")
        case WaitingForInput():
            return f'<p class="wait">? waiting: {_e(event.question)}</p>'
        case InputReceived():
            label = INPUT_LABELS.get(event.kind, "answered")
            return f'<p class="wait">↳ {label}: {_e(event.answer)}</p>'
        case MemoryProposed():
            rows = [f"{'remembered' if e.get('state') == 'accepted' else 'proposed'} "
                    f"({e.get('source')}, #{e.get('id')}): {e.get('text', '')}"
                    for e in event.entries] + [f"left out: {why}" for why in event.dropped]
            return "".join(f'<p class="meta">· memory {_e(_first(str(row), 300))}</p>'
                           for row in rows)
        case Notice() if event.level != "info":
            return f'<p class="meta">! {_e(_first(event.message, 300))}</p>'
        case UnknownEvent():
            return (f'<p class="meta">· {_e(_first(event.type, 60))}: an event this version '
                    f"of normalize does not know</p>")
    return ""


def _harness_tools(events: list[HarnessToolCalled | HarnessToolFinished]) -> str:
    """A harness's own tool calls, each with what it gave back (open when one failed)."""
    import json

    ended = {e.call_id: e for e in events if isinstance(e, HarnessToolFinished)}
    calls = [e for e in events if isinstance(e, HarnessToolCalled)]
    rows = []
    for call in calls:
        given = next((v for k in ("command", "cmd", "file_path", "path", "pattern", "query")
                      if isinstance(v := call.input.get(k), str) and v), None)
        shown = given if given is not None else json.dumps(call.input, ensure_ascii=False)
        end = ended.get(call.call_id)
        status = "" if end is None else "success" if end.ok else "error"
        rows.append(f"<li><code>{_e(call.tool)}</code> <code>{_e(_first(shown, 200))}</code>"
                    + (f' <span class="status-{status}">{status}</span>' if status else "")
                    + (_output(end.output, "output") if end is not None and end.output else "")
                    + "</li>")
    failed = any(not e.ok for e in ended.values())
    harness = calls[0].harness if calls else "the harness"
    return (f"<details{' open' if failed else ''}><summary>{len(calls)} tool call"
            f"{'' if len(calls) == 1 else 's'} by {_e(harness)}</summary><ol>{''.join(rows)}"
            "</ol></details>")


def _turn(turn: Turn, diffs: dict[int, str]) -> str:
    """One turn as an HTML article: its heading, prose, actions, steps' diffs and other events."""
    meta = _turn_meta(turn)
    out = [f'<article class="turn{" rewound" if turn.rewound else ""}" id="turn-{turn.turn}">',
           f'<h3>{_e(_turn_title(turn))} <span class="meta">· {_e(" · ".join(meta))}</span></h3>']
    for prose in turn.prose:
        out.append(f'<div class="prose">{_e(prose)}</div>')
    if turn.actions:
        out.append("<ol>")
        steps = {c.key: c.step for c in turn.checkpoints if c.kind == "action"}
        for action in sorted(turn.actions, key=lambda a: a.status == "success"):
            out.extend(_action_item(action, steps.get(action.key), bool(turn.checkpoints)))
        out.append("</ol>")
    for checkpoint in turn.checkpoints:
        out.extend(_checkpoint_lines(checkpoint, diffs.get(checkpoint.step, "")))
    if turn.tools:
        out.append(_harness_tools(turn.tools))
    for event in turn.other:
        out.append(_run_event(event))
    out.append("</article>")
    return "\n".join(out)


def _turn_meta(turn: Turn) -> list[str]:
    """A turn heading's facts: how long it took, its tokens, cost and model, whether rewound."""
    took = max(0.0, turn.ended - turn.started)
    meta = [f"{took:.2f}s"]
    if turn.input_tokens or turn.output_tokens:
        meta.append(f"{turn.input_tokens:,} in / {turn.output_tokens:,} out tokens")
    if turn.cost_usd:
        meta.append(f"${turn.cost_usd:.4f}")
    if turn.model:
        meta.append(turn.model)
    if turn.rewound:
        meta.append("rewound")
    return meta


def _turn_title(turn: Turn) -> str:
    """`Turn N`, or what made a turn of only undo/rewind checkpoints."""
    kinds = {c.kind for c in turn.checkpoints}
    if not turn.actions and not turn.prose and kinds and kinds <= {"undo", "rewind"}:
        return " · ".join(sorted(kinds))  # made by `normalize undo` / `resume --rewind`
    return f"Turn {turn.turn}"


def _action_item(action: ActionFinished, step: int | None, has_diff: bool) -> list[str]:
    """An action's list item: step, command, status, error, hosts and output (folded when the
    step's diff (`has_diff`) shows what an edit did)."""
    mark = "" if step is None else f'<span class="meta">#{step}</span> '
    command = _e(_first(action.command or action.tool))
    out = [f'<li id="a-{action.seq}">{mark}<code>{command}'
           f'</code> <span class="status-{_e(action.status)}">{_e(action.status)}'
           f"</span> <span class=\"meta\">{action.duration:.2f}s"
           f"{'' if action.exit_code is None else f' · exit {action.exit_code}'}"
           "</span>"]
    if action.error:
        out.append(f"<pre>{_e(action.error)}</pre>")
    hosts = action.data.get("network")
    line = hosts_line(hosts) if isinstance(hosts, list) else None
    if line:
        out.append(f'<p class="meta">{_e(line)}</p>')
    if action.tool in ("edit", "write") and action.status == "success" and \
            has_diff and action.preview.strip():  # the step's diff shows it
        out.append(f"<details><summary>output</summary><pre>{_e(action.preview)}"
                   "</pre></details>")
    else:  # an output that opens with the error says the rest only
        shown = action.preview
        if action.error and shown.startswith(action.error.strip()):
            shown = shown[len(action.error.strip()):].lstrip("\n")
        out.append(_output(shown, "output", open_=action.status != "success"))
    out.append("</li>")
    return out


def _checkpoint_lines(checkpoint: CheckpointTaken, patch: str) -> list[str]:
    """A step's counts, with its diff (`patch`) open under them when there is one."""
    noun = "file" if checkpoint.files == 1 else "files"
    label = f"step #{checkpoint.step}: {checkpoint.files} {noun}, " \
            f"+{checkpoint.added} -{checkpoint.removed}"
    if patch:
        return [f"<details open><summary>{_e(label)}</summary>{diff_html(patch)}</details>"]
    if checkpoint.files:
        return [f'<p class="meta">{_e(label)}</p>']
    return []


def _ending(task: Task, runs: list[Event]) -> str:
    ended = [e for e in runs if isinstance(e, RunEnded)]
    out = ["<h2>How it ended</h2>"]
    if ended:
        last = ended[-1]
        out.append(f'<p><span class="status-{"success" if last.status == "done" else "error"}">'
                   f"{_e(last.status)}</span> after {last.turns} turns, {last.actions} actions"
                   f"{'' if not last.cost_usd else f', ${last.cost_usd:.4f}'}</p>")
    if task.summary:
        out.append(f'<div class="prose">{_e(task.summary)}</div>')
    if task.result is not None:  # the validated --output-schema result
        shown = json.dumps(task.result, indent=2, ensure_ascii=False)
        out.append(f'<h3>Result</h3><pre class="result">{_e(shown)}</pre>')
    if task.pending is not None:
        out.append(f'<p class="wait">? still waiting: {_e(task.pending.question)}</p>')
    if task.error:
        out.append(f"<pre>{_e(task.error)}</pre>")
    return "\n".join(out)
