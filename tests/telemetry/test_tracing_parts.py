"""The tracing subscriber in-process: spans read back from an in-memory exporter."""

from __future__ import annotations

import json

import pytest

from normalize.events import ActionFinished, ActionStarted, ChildCreated, RunEnded, RunStarted

pytest.importorskip("opentelemetry.sdk",
                    reason="opentelemetry-sdk is not installed (.ci/run installs it)")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from normalize.telemetry.spans import Tracing

TOKEN = "sk-ant-api03-" + "x" * 40  # the shape of an Anthropic key: redacted by its shape
OUTER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def traced(parent: str | None = None) -> tuple[Tracing, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return Tracing(provider, parent=parent), memory


def test_text_reaching_the_subscriber_unredacted_is_redacted_in_the_spans() -> None:
    tracing, memory = traced()
    tracing(RunStarted(task_id="t1", ts=1.0, goal=f"use {TOKEN}", driver="llm"))
    tracing(ActionStarted(task_id="t1", ts=2.0, key="0.0", tool="run",
                          command=f"run curl -H {TOKEN}", action={"params": {"args": [TOKEN]}}))
    tracing(ActionFinished(task_id="t1", ts=3.0, key="0.0", tool="run", status="error",
                           error=f"refused {TOKEN}"))
    tracing(RunEnded(task_id="t1", ts=4.0, status="done", summary=f"said {TOKEN}"))
    spans = memory.get_finished_spans()
    assert {s.name for s in spans} == {"run", "turn 1", "execute_tool run"}
    shown = json.dumps([dict(s.attributes or {}) for s in spans])
    assert TOKEN not in shown and shown.count("[REDACTED]") == 5


def test_a_traceparent_makes_the_run_a_child_and_a_spawn_hands_its_own_on() -> None:
    tracing, memory = traced(parent=OUTER)
    assert tracing.child_env("c0") == {"TRACEPARENT": OUTER}  # outside a run: the outer trace
    tracing(RunStarted(task_id="t1", ts=1.0, goal="g", driver="llm"))
    tracing(ActionStarted(task_id="t1", ts=2.0, key="0.0", tool="spawn", command="spawn x"))
    tracing(ChildCreated(task_id="t1", ts=2.5, key="0.0", child_id="c1"))
    handed = tracing.child_env("c1")
    tracing(ActionFinished(task_id="t1", ts=3.0, key="0.0", tool="spawn", status="success"))
    tracing(RunEnded(task_id="t1", ts=4.0, status="done"))
    by_name = {s.name: s for s in memory.get_finished_spans()}
    run, spawn = by_name["run"], by_name["execute_tool spawn"]
    assert run.parent is not None and f"{run.parent.span_id:016x}" == OUTER.split("-")[2]
    assert f"{run.context.trace_id:032x}" == OUTER.split("-")[1]
    assert handed == {"TRACEPARENT": f"00-{spawn.context.trace_id:032x}-"
                                     f"{spawn.context.span_id:016x}-01"}


def test_a_run_that_ends_first_ends_its_open_spans_in_error() -> None:
    tracing, memory = traced()
    tracing(RunStarted(task_id="t1", ts=1.0, driver="llm"))
    tracing(ActionStarted(task_id="t1", ts=2.0, key="0.0", tool="run", command="run x"))
    tracing(RunEnded(task_id="t1", ts=3.0, status="interrupted"))
    by_name = {s.name: s for s in memory.get_finished_spans()}
    assert by_name["execute_tool run"].status.description == "the run ended before the action did"
    assert by_name["execute_tool run"].end_time == by_name["run"].end_time == 3_000_000_000


def test_a_failed_run_and_a_retried_request_end_in_error() -> None:
    from opentelemetry.trace import StatusCode

    from normalize.events import ModelRequested, ModelRetried

    tracing, memory = traced()
    tracing(RunStarted(task_id="t1", ts=1.0, driver="llm"))
    tracing(ModelRequested(task_id="t1", ts=2.0, turn=0, model="m"))
    tracing(ModelRetried(task_id="t1", ts=3.0, attempt=1, reason="overloaded (529)"))
    tracing(RunEnded(task_id="t1", ts=4.0, status="failed", error="the model gave up"))
    by_name = {s.name: s for s in memory.get_finished_spans()}
    assert by_name["chat m"].status.status_code is StatusCode.ERROR
    assert by_name["chat m"].status.description == "overloaded (529)"
    assert by_name["run"].status.status_code is StatusCode.ERROR
    assert by_name["run"].status.description == "the model gave up"


def test_closing_ends_a_run_still_open_in_error_and_sends_it() -> None:
    from opentelemetry.trace import StatusCode

    tracing, memory = traced()
    tracing(RunStarted(task_id="t1", ts=1.0, driver="llm"))
    tracing(ActionStarted(task_id="t1", ts=2.0, key="0.0", tool="run", command="run x"))
    tracing.close()
    by_name = {s.name: s for s in memory.get_finished_spans()}
    assert set(by_name) == {"run", "turn 1", "execute_tool run"}
    assert by_name["run"].status.status_code is StatusCode.ERROR
    assert by_name["run"].status.description == "the process ended before the run"
