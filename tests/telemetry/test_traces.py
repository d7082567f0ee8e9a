"""Traces of real runs, received by a real OTLP/HTTP receiver on loopback (issue 28, must-show 6).

Each test runs `normalize` as a process with a scripted model, in auto and
non-interactive (CI=true), exporting to `otlp_receiver.Receiver`, and reads
back the decoded span tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import Span, black_hole, receiver

from normalize.sandbox import probe

PY = sys.executable
SECRET = "s3cr3t-probe-value-4242"
needs_sandbox = pytest.mark.skipif(not probe().available,
                                   reason=f"no sandbox here: {probe().reason}")


def site(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    return ws


def agent(tmp_path: Path, replies: list[str], *flags: str, goal: str = "look at a.py",
          env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """`normalize agent GOAL --json` with `replies` as the model, started (not waited for)."""
    script = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    script.write_text(json.dumps(replies))
    argv = [PY, "-m", "normalize.cli.app", "agent", goal, "--model", f"scripted:{script}",
            "--json", "--approve", "auto", "-w", str(tmp_path / "ws"), *flags]
    return subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "CI": "true", **(env or {})},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen[str]) -> tuple[int, list[dict[str, Any]], str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, [json.loads(x) for x in out.splitlines() if x.startswith("{")], err


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def has_run(task_id: str | None = None) -> Any:
    return lambda spans: any(s.name == "run" and (task_id is None or
                                                 s.attrs["normalize.task_id"] == task_id)
                             for s in spans)


def test_a_two_turn_task_arrives_as_a_span_tree_with_its_attributes(tmp_path: Path) -> None:
    site(tmp_path)
    with receiver() as collector:
        proc = agent(tmp_path, ["Looking.\nview a.py", "done Looked at it."],
                     goal=f"look at a.py (the key is {SECRET})",
                     env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
                          "OTEL_SERVICE_NAME": "probe-service",
                          "OTEL_EXPORTER_OTLP_HEADERS": "x-probe-token=abc123",
                          "PROBE_API_KEY": SECRET})
        code, events, err = finish(proc)
        assert code == 0, err
        spans = collector.wait_for(has_run(), "run span")
        assert collector.paths() and set(collector.paths()) == {"/v1/traces"}
        assert all(h.get("x-probe-token") == "abc123" for h in collector.headers())
    task_id = events[0]["task_id"]
    (run,) = named(spans, "run")
    turns = sorted((s for s in spans if s.name.startswith("turn ")), key=lambda s: s.start)
    assert [t.name for t in turns] == ["turn 1", "turn 2"]
    assert run.parent_id == "" and all(t.parent_id == run.span_id for t in turns)
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert all(s.attrs["normalize.task_id"] == task_id for s in spans)
    assert all(s.resource["service.name"] == "probe-service" for s in spans)
    assert run.attrs["normalize.status"] == "done" and run.attrs["normalize.turns"] == 2
    assert SECRET not in run.attrs["normalize.goal"] and "[REDACTED]" in run.attrs["normalize.goal"]
    # one model request per turn, under its turn, with what the reply reported
    replies = [e for e in events if e["type"] == "model_replied"]
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start)
    assert [c.parent_id for c in chats] == [t.span_id for t in turns]
    for chat, reply in zip(chats, replies, strict=True):
        assert chat.attrs["gen_ai.usage.input_tokens"] == reply["input_tokens"]
        assert chat.attrs["gen_ai.usage.output_tokens"] == reply["output_tokens"]
        assert chat.attrs["gen_ai.usage.cache_read.input_tokens"] == reply["cache_read_tokens"]
        assert chat.attrs["gen_ai.usage.cache_creation.input_tokens"] == \
            reply["cache_write_tokens"]
        assert chat.attrs["normalize.cost_usd"] == reply["cost_usd"]
        assert chat.attrs["gen_ai.response.model"] == reply["model"]
    assert sum(c.attrs["gen_ai.usage.input_tokens"] for c in chats) == \
        run.attrs["gen_ai.usage.input_tokens"]
    # the action, under the first turn: verb, target, status, duration
    (view,) = named(spans, "execute_tool view")
    assert view.parent_id == turns[0].span_id
    assert view.attrs["normalize.action.verb"] == "view"
    assert view.attrs["normalize.action.target"] == "a.py"
    assert view.attrs["normalize.action.status"] == "success"
    assert view.attrs["normalize.action.duration_s"] >= 0 and view.end >= view.start
    assert turns[0].start <= view.start and view.end <= turns[1].start <= run.end


@needs_sandbox
def test_ctrl_c_ends_the_run_span_and_the_unfinished_action_and_sends_them(
        tmp_path: Path) -> None:
    ws = site(tmp_path)
    wait = (f"import pathlib, time; pathlib.Path({str(ws / 'started')!r}).write_text('1'); "
            f"time.sleep(60)")
    with receiver() as collector:
        proc = agent(tmp_path, [f'run {PY} -c "{wait}"', "done never"],
                     env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
        deadline = time.monotonic() + 60
        while not (ws / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        code, _events, err = finish(proc)
        assert code == 130, err
        spans = collector.wait_for(has_run(), "run span")
    (run,) = named(spans, "run")
    assert run.attrs["normalize.status"] == "interrupted"
    (action,) = named(spans, "execute_tool run")
    assert action.end <= run.end and action.parent_id != ""
    # cut short, it never finished (resume says its outcome is unknown): ended with the run
    assert action.status == 2 and action.message == "the run ended before the action did"
    assert "normalize.action.status" not in action.attrs


def test_an_unreachable_collector_costs_little_and_is_said_once(tmp_path: Path) -> None:
    site(tmp_path)
    replies = ["Looking.\nview a.py", "done Looked at it."]
    started = time.monotonic()
    code, _, err = finish(agent(tmp_path, replies))
    plain = time.monotonic() - started
    assert code == 0, err
    with black_hole() as url:
        started = time.monotonic()
        code, events, err = finish(agent(tmp_path, replies,
                                         env={"OTEL_EXPORTER_OTLP_ENDPOINT": url}))
        traced = time.monotonic() - started
    assert code == 0, err
    assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "done"
    said = [line for line in err.splitlines() if "traces:" in line]
    assert said == [f"normalize: warning: traces: the collector at {url}/v1/traces did not take "
                    f"them (unreachable or refused); the task went on without them"]
    # the SDK's own default would wait 10 s (its export timeout) here; normalize bounds it
    assert traced - plain < 6.0, (plain, traced)


def test_otel_sdk_disabled_turns_tracing_off_even_with_otel_and_says_so(tmp_path: Path) -> None:
    site(tmp_path)
    with receiver() as collector:
        code, events, err = finish(agent(
            tmp_path, ["Looking.\nview a.py", "done Looked at it."], "--otel",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_SDK_DISABLED": "true"}))
        assert code == 0, err
        assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "done"
        assert collector.paths() == []  # the run has ended: whatever it sent has arrived
    assert [line for line in err.splitlines() if "OTEL_SDK_DISABLED" in line] == [
        "normalize: warning: --otel: OTEL_SDK_DISABLED=true switches OpenTelemetry off; "
        "no traces"]


@needs_sandbox
def test_a_sub_task_is_traced_under_the_spawn_that_started_it(tmp_path: Path) -> None:
    site(tmp_path)
    child = tmp_path / "child.json"
    child.write_text(json.dumps(["done child did it"]))
    with receiver() as collector:
        endpoint = f"{collector.url}/custom/path"
        proc = agent(tmp_path, [f'spawn --model scripted:{child} "say hi"', "done parent"],
                     "--otel", env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint})
        code, events, err = finish(proc)
        assert code == 0, err
        parent_id = events[0]["task_id"]
        child_id = next(e["child_id"] for e in events if e["type"] == "child_created")
        spans = collector.wait_for(lambda s: has_run(parent_id)(s) and has_run(child_id)(s),
                                   "both runs")
        assert set(collector.paths()) == {"/custom/path"}
    runs = {s.attrs["normalize.task_id"]: s for s in named(spans, "run")}
    (spawn,) = named(spans, "execute_tool spawn")
    assert spawn.attrs["normalize.task_id"] == parent_id
    assert runs[child_id].parent_id == spawn.span_id
    assert runs[child_id].trace_id == runs[parent_id].trace_id == spawn.trace_id
    assert ("child_created", {"normalize.child_id": child_id}) in spawn.events


DEFAULT_PORT = 4318  # where `--otel` sends spans when no OTEL_EXPORTER_OTLP_* names a place


def _two_items(tmp_path: Path) -> None:
    """A batch workflow and two items, each appending to a file in its own directory."""
    (tmp_path / "wf.toml").write_text(
        '[workflow]\nname = "touch"\nworkspace = "dir:{item.path}"\n[workflow.permissions]\n'
        'mode = "yes"\n[[workflow.steps]]\nname = "edit"\n'
        'action = "run sh -c \'echo {item.path} >> f.txt\'"\n')
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    (tmp_path / "items.jsonl").write_text('{"path": "a"}\n{"path": "b"}\n')


def _batch_tree(collector: Any, done: subprocess.CompletedProcess[str]
                ) -> tuple[str, list[str], dict[str, Any]]:
    """The batch's id, its items' and every run span, once the batch's run holds each item's."""
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    batch = events[0]["batch"]
    items = [e["item_task_id"] for e in events if e["type"] == "item_updated"]
    spans = collector.wait_for(lambda s: all(has_run(t)(s) for t in (batch, *items)),
                               "the batch's run and its items'")
    runs = {s.attrs["normalize.task_id"]: s for s in named(spans, "run")}
    assert runs[batch].attrs["normalize.driver"] == "batch"
    assert runs[batch].attrs["normalize.status"] == "done"
    for item in items:
        assert runs[item].parent_id == runs[batch].span_id
        assert runs[item].trace_id == runs[batch].trace_id
    return batch, items, runs


@needs_sandbox
@pytest.mark.parametrize("command", [
    ["batch", "wf.toml", "--items", "items.jsonl"],
    ["agent", "--items", "items.jsonl", "--model", "scripted:script.json", "--approve", "auto",
     "look at {item.path}"],
    ], ids=["batch", "agent-items"])
def test_otel_alone_traces_a_batch_and_each_items_run_under_it(
        tmp_path: Path, command: list[str]) -> None:
    _two_items(tmp_path)
    (tmp_path / "script.json").write_text(json.dumps(["done looked"]))
    # no variable turns tracing on: only the flag, here and (passed on) in each item's run
    quiet = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEPARENT"))}
    with receiver(DEFAULT_PORT) as collector:
        done = subprocess.run(
            [PY, "-m", "normalize.cli.app", *command, "--otel", "--json"], cwd=tmp_path,
            capture_output=True, text=True, timeout=300,
            env={**quiet, "CI": "true", "NORMALIZE_HOME": str(tmp_path / "home")})
        batch, items, runs = _batch_tree(collector, done)
    assert set(items) and set(runs) == {batch, *items}
    assert all(runs[item].attrs["normalize.status"] == "done" for item in items)


@needs_sandbox
def test_a_batch_is_one_span_with_each_items_run_under_it(tmp_path: Path) -> None:
    _two_items(tmp_path)
    with receiver() as collector:
        done = subprocess.run(
            [PY, "-m", "normalize.cli.app", "batch", "wf.toml", "--items", "items.jsonl",
             "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={**os.environ, "CI": "true", "NORMALIZE_HOME": str(tmp_path / "home"),
                 "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
        _, items, _ = _batch_tree(collector, done)
    assert len(set(items)) == 2
