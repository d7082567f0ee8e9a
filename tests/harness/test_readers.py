"""Each harness's stream, line by line, into normalize events: a line of each kind the CLIs
print (taken from the pinned versions' output), unknown kinds kept, usage and errors read."""

from __future__ import annotations

import json

from normalize.cli.describe import describe
from normalize.events import (
    BaseEvent,
    HarnessEvent,
    HarnessSession,
    HarnessToolCalled,
    HarnessToolFinished,
    TextDelta,
    ThinkingDelta,
)
from normalize.tools.harness import harness_named
from normalize.tools.harness.base import TurnReader


def feed(name: str, *objects: object) -> tuple[list[BaseEvent], TurnReader]:
    reader = harness_named(name).reader()
    events: list[BaseEvent] = []
    for obj in objects:
        events += reader.feed(obj if isinstance(obj, str) else json.dumps(obj))
    return events, reader


CLAUDE_TOOL = {"type": "assistant", "message": {
    "id": "msg_1", "content": [{"type": "thinking", "thinking": "hmm"},
                               {"type": "text", "text": "Running it."},
                               {"type": "tool_use", "id": "tu_1", "name": "Bash",
                                "input": {"command": "pytest -q"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
              "cache_creation_input_tokens": 20}}}
CLAUDE_RESULT = {"type": "user", "message": {"content": [
    {"type": "tool_result", "tool_use_id": "tu_1", "is_error": True,
     "content": [{"type": "text", "text": "1 failed"}]}]}}


def test_claude_stream_into_events() -> None:
    events, reader = feed("claude", {"type": "system", "subtype": "init", "session_id": "s-9",
                                     "model": "claude-sonnet-4-5"},
                          CLAUDE_TOOL, CLAUDE_RESULT,
                          {"type": "system", "subtype": "api_retry", "attempt": 1},
                          {"type": "result", "subtype": "success", "result": "All done.",
                           "session_id": "s-9", "total_cost_usd": 0.25, "num_turns": 2,
                           "usage": {"input_tokens": 11, "output_tokens": 7,
                                     "cache_read_input_tokens": 300,
                                     "cache_creation_input_tokens": 40}})
    assert [type(e) for e in events] == [HarnessSession, ThinkingDelta, TextDelta,
                                         HarnessToolCalled, HarnessToolFinished, HarnessEvent]
    called, finished, kept = events[3], events[4], events[5]
    assert isinstance(called, HarnessToolCalled) and called.input == {"command": "pytest -q"}
    assert isinstance(finished, HarnessToolFinished) and not finished.ok
    assert finished.output == "1 failed"
    assert isinstance(kept, HarnessEvent) and kept.kind == "system/api_retry"  # kept whole
    assert kept.data["attempt"] == 1
    usage = reader.usage
    assert (usage.cost_usd, usage.cache_read_tokens, usage.cache_write_tokens) == (0.25, 300, 40)
    assert reader.session == "s-9" and reader.result == "All done."
    assert describe(called) == "  · claude ran Bash pytest -q"


def test_claude_error_and_budget_results() -> None:
    _, failed = feed("claude", {"type": "result", "subtype": "success", "is_error": True,
                                "result": "API Error: 529 overloaded"})
    assert failed.error == "API Error: 529 overloaded" and failed.retryable
    _, spent = feed("claude", {"type": "result", "subtype": "error_max_budget_usd",
                               "is_error": True})
    assert spent.stopped == "budget" and spent.error is None


def test_codex_stream_into_events() -> None:
    command = {"id": "item_1", "type": "command_execution", "command": "bash -lc ls",
               "aggregated_output": "calc.py\n", "exit_code": 0, "status": "completed"}
    events, reader = feed("codex", {"type": "thread.started", "thread_id": "t-1"},
                          {"type": "turn.started"},
                          {"type": "item.started", "item": {**command, "status": "in_progress"}},
                          {"type": "item.completed", "item": command},
                          {"type": "item.completed", "item": {"id": "item_2",
                                                              "type": "reasoning",
                                                              "text": "thinking"}},
                          {"type": "item.completed", "item": {"id": "item_3",
                                                              "type": "todo_list",
                                                              "items": []}},
                          {"type": "item.completed", "item": {"id": "item_4",
                                                              "type": "agent_message",
                                                              "text": "Listed."}},
                          {"type": "turn.completed", "usage": {
                              "input_tokens": 1000, "cached_input_tokens": 800,
                              "output_tokens": 50}})
    assert [type(e) for e in events] == [HarnessSession, HarnessToolCalled,
                                         HarnessToolFinished, ThinkingDelta, HarnessEvent,
                                         TextDelta]
    usage = reader.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (200, 800, 50)
    assert reader.result == "Listed." and reader.session == "t-1"
    _, failed = feed("codex", {"type": "turn.failed", "error": {"message": "429 Too Many"}})
    assert failed.error == "429 Too Many" and failed.retryable


def test_aider_output_and_its_cost_line() -> None:
    events, reader = feed("aider", "Applied edit to calc.py",
                          "Tokens: 2.3k sent, 85 received. Cost: $0.0074 message, "
                          "$0.0074 session.")
    assert [type(e) for e in events] == [HarnessSession, TextDelta]
    usage = reader.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (2300, 85, 0.0074)


def test_a_line_that_is_not_json_is_kept_for_the_error_not_lost() -> None:
    events, reader = feed("claude", "npm WARN something", {"type": "brand_new", "x": 1})
    assert reader.unparsed == ["npm WARN something"]
    assert isinstance(events[0], HarnessEvent) and events[0].kind == "brand_new"
