"""A task's events as ACP `session/update`s: live (a subscriber) and replayed (from a journal).

Live, the model's text streams as `agent_message_chunk` (thinking as
`agent_thought_chunk`); each action is a `tool_call` when it starts and a
`tool_call_update` when it ends, its id the action's key (`3.0`: turn 3, first
action). An `edit` or `write` that changed a file carries the file's text
before and after as ACP `diff` content (read from the workspace when the
action starts and ends); every action carries its output's preview as text.
`plan` actions become `plan` updates. Replayed (`session/load`), the journal
gives the goal and follow-ups as `user_message_chunk`s and each model reply
whole; an edit's diff is then the unified diff its result recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    FileEditToolCallContent,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from normalize.events import (
    ActionFinished,
    ActionInterrupted,
    ActionStarted,
    Event,
    InputReceived,
    ModelReplied,
    RunEnded,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    WaitingForInput,
    decode_events,
)
from normalize.fsopen import read_bytes

Update = (AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart
          | ToolCallProgress | AgentPlanUpdate)

KINDS = {"view": "read", "skeleton": "read", "analyze": "read", "map": "read",
         "grep": "search", "edit": "edit", "write": "edit", "run": "execute",
         "test": "execute", "fetch": "fetch", "note": "think", "plan": "think"}
"""normalize's tools as ACP tool kinds (any other: `other`)."""

FAILED = {"error", "blocked", "cancelled", "interrupted"}
HIDDEN = {"done"}
"""Tools shown by their run's end (the summary), not as a tool call of their own."""
CHANGES = {"edit", "write"}
USER_INPUT = {"follow_up", "typed", "question"}
"""The kinds of `InputReceived` whose answer is the person's own words."""


class LiveUpdates:
    """A run's subscriber that sends each event's updates to `send` (in the engine's thread)."""

    def __init__(self, workspace: Path, send: Callable[[Update], None],
                 redact: Callable[[str], str] = str) -> None:
        self.workspace = workspace
        self.send = send
        self.redact = redact  # the store's: a diff's texts are shown, so redacted as events are
        self.plan: list[str] = []
        self.before: dict[str, dict[str, str]] = {}  # action key -> path -> text before
        self.current = ""  # the key of the side effect started last (an approval names it)
        self.tokens = [0, 0]  # this run's input and output tokens (the task's at its end less
        self._at_start = (0, 0)  # at its start)

    def __call__(self, event: Event) -> None:
        for update in self.updates(event):
            self.send(update)

    def updates(self, event: Event) -> Iterator[Update]:
        match event:
            case TextDelta():
                yield update_agent_message_text(event.text)
            case ThinkingDelta():
                yield update_agent_thought_text(event.text)
            case ActionStarted() if event.tool not in HIDDEN:
                if not event.read_only:
                    self.current = event.key
                if event.tool in CHANGES:
                    self.before[event.key] = self._snapshot(event.action)
                yield started(event, self.workspace)
            case ActionFinished() if event.tool not in HIDDEN:
                yield self._finished(event)
                yield from self._planned(event)
            case ActionInterrupted():
                yield interrupted(event)
            case RunStarted():
                self._at_start = (event.input_tokens, event.output_tokens)
            case WaitingForInput():
                yield update_agent_message_text(f"\n{event.question}\n")
            case RunEnded():
                yield from self._ended(event)
            case _:
                pass

    def _finished(self, event: ActionFinished) -> ToolCallProgress:
        before = self.before.pop(event.key, {})
        path = event.data.get("path") if event.tool in CHANGES else None
        if event.status == "success" and isinstance(path, str):
            diff = self._diff(path, before)
            if diff is not None:
                return finished(event, [diff])
        return finished(event)

    def _diff(self, rel: str, before: dict[str, str]) -> FileEditToolCallContent | None:
        """The file's text before the action and now, as ACP diff content."""
        after = read_text(self.workspace, rel)
        if after is None:
            return None
        old = before.get(rel)
        return tool_diff_content(str(self.workspace / rel), self.redact(after),
                                 None if old is None else self.redact(old))

    def _snapshot(self, action: dict[str, Any]) -> dict[str, str]:
        """The text of every file an `edit`/`write` argument may name, before it runs."""
        args = action.get("params", {}).get("args") or []
        if not args or not isinstance(args[0], str):
            return {}
        texts = {}
        for rel in candidates(args[0]):
            text = read_text(self.workspace, rel)
            if text is not None:
                texts[rel] = text
        return texts

    def _planned(self, event: ActionFinished) -> Iterator[AgentPlanUpdate]:
        steps = event.data.get("plan") if event.tool == "plan" else None
        if event.status == "success" and isinstance(steps, list):
            self.plan.extend(str(step) for step in steps)
            yield plan_update(self.plan)

    def _ended(self, event: RunEnded) -> Iterator[Update]:
        self.tokens = [event.input_tokens - self._at_start[0],
                       event.output_tokens - self._at_start[1]]
        if event.status == "done" and self.plan:
            yield plan_update(self.plan, done=True)
        yield ended(event)


def started(event: ActionStarted, workspace: Path) -> ToolCallStart:
    """The `tool_call` of an action that starts."""
    args = event.action.get("params", {}).get("args") or []
    locations = None
    if event.tool in ("view", "skeleton", *CHANGES) and args and isinstance(args[0], str):
        rel = next(iter(candidates(args[0])))
        locations = [ToolCallLocation(path=str(workspace / rel))]
    title = (event.command or event.tool).split("\n", 1)[0].removesuffix(" <<EOF")
    return start_tool_call(event.key, title,
                           kind=KINDS.get(event.tool, "other"),  # type: ignore[arg-type]
                           status="in_progress", locations=locations,
                           raw_input={"command": event.command})


def finished(event: ActionFinished, extra: list[Any] | None = None) -> ToolCallProgress:
    """The `tool_call_update` of an action that ended: its status, its output's preview."""
    shown = event.preview or event.error or ""
    if event.error and event.preview and event.error not in event.preview:
        shown = f"{event.error}\n{event.preview}"
    content: list[Any] = [*(extra or [])]
    if shown:
        content.append(tool_content(text_block(shown)))
    return update_tool_call(event.key, status="failed" if event.status in FAILED
                            else "completed", content=content or None,
                            raw_output={"status": event.status, "exit_code": event.exit_code})


def interrupted(event: ActionInterrupted) -> ToolCallProgress:
    """An action the last process left unfinished (said when the task resumes)."""
    what = "runs again" if event.rerun else "its outcome is unknown"
    return update_tool_call(event.key, status="in_progress" if event.rerun else "failed",
                            content=[tool_content(text_block(
                                f"interrupted when the agent stopped: {what}"))])


def ended(event: RunEnded) -> AgentMessageChunk:
    """The run's end in words: the summary of a done task, else its status and why."""
    if event.status == "done":
        return update_agent_message_text(f"\n{event.summary or 'done'}\n")
    why = event.error or event.summary
    return update_agent_message_text(f"\n[{event.status}]{f' {why}' if why else ''}\n")


def plan_update(steps: list[str], *, done: bool = False) -> AgentPlanUpdate:
    """The plan so far: the first step in progress (the context moves to it), or all done."""
    return update_plan([plan_entry(step, status="completed" if done else
                                   "in_progress" if n == 0 else "pending")
                        for n, step in enumerate(steps)])


def candidates(arg: str) -> dict[str, None]:
    """The paths an `edit` argument may name: `PATH`, `PATH:START-END`, `PATH/SYMBOL…`."""
    found = {arg: None}
    head, sep, _ = arg.rpartition(":")
    if sep:
        found[head] = None
    parts = arg.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        found["/".join(parts[:cut])] = None
    return found


def read_text(workspace: Path, rel: str) -> str | None:
    """A workspace file's text (never through a link), or None: absent, binary or outside."""
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        return None
    try:
        return read_bytes(workspace, rel).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def replayed(journal: Iterable[dict[str, Any]], workspace: Path) -> Iterator[Update]:
    """A task's history as the updates a client would have seen, from its journal."""
    live = LiveUpdates(workspace, lambda _: None)
    for event in decode_events(journal):
        match event:
            case RunStarted() if not event.resumed:
                yield update_user_message_text(event.goal)
            case InputReceived() if event.kind in USER_INPUT:
                yield update_user_message_text(event.answer)
            case ModelReplied() if event.text:
                yield update_agent_message_text(event.text)
            case ActionStarted() if event.tool not in HIDDEN:
                yield started(event, workspace)
            case ActionFinished() if event.tool not in HIDDEN:
                yield finished(event)
                yield from live._planned(event)
            case ActionInterrupted() | WaitingForInput() | RunEnded():
                yield from live.updates(event)
            case _:
                pass
