"""ScriptedModel (strict, recording) and ReplayModel (from a task journal)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normalize.errors import ConfigError, CorruptTaskError, ProviderError, UsageError
from normalize.providers import (
    Completed,
    ModelClient,
    ModelRequest,
    TextDelta,
    complete,
    create_client,
)
from normalize.providers.replay import ReplayExhaustedError, ReplayModel
from normalize.providers.synthetic import estimate_tokens
from normalize.testing import ScriptedModel, ScriptExhaustedError


def ask(text: str, system: str = "be brief") -> ModelRequest:
    return ModelRequest(system=system, messages=[{"role": "user", "content": text}])


def test_scripted_model_streams_and_records_requests() -> None:
    model = ScriptedModel(["view calc.py", lambda req: f"echo {req.last_message}"])
    assert isinstance(model, ModelClient)
    first = list(model.stream(ask("start")))
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == "view calc.py"
    assert isinstance(first[-1], Completed) and first[-1].text == "view calc.py"
    assert complete(model, ask("again")).text == "echo again"
    assert [r.last_message for r in model.requests] == ["start", "again"]
    model.assert_done()


def test_scripted_model_fails_on_an_extra_call() -> None:
    model = ScriptedModel(["only one"])
    complete(model, ask("first"))
    with pytest.raises(ScriptExhaustedError) as info:
        complete(model, ask("what next?"))
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "call 2" in message and "1 step" in message and "what next?" in message
    assert not info.value.retryable


def test_assert_done_fails_on_leftover_steps() -> None:
    model = ScriptedModel(["a", "b", RuntimeError("boom")])
    complete(model, ask("x"))
    with pytest.raises(AssertionError, match="2 unplayed step"):
        model.assert_done()


def test_scripted_exception_step_is_raised() -> None:
    model = ScriptedModel([ProviderError("down", retryable=False)])
    with pytest.raises(ProviderError, match="down"):
        list(model.stream(ask("x")))


def test_usage_estimate_and_system_prompt_caching() -> None:
    system = "s" * 400
    model = ScriptedModel(["r" * 40, "r" * 40])
    first = complete(model, ask("q" * 80, system))
    second = complete(model, ask("q" * 80, system))
    assert first.usage.input_tokens == 20 and first.usage.output_tokens == 10
    assert first.usage.cache_write_tokens == 100 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == 100 and second.usage.cache_write_tokens == 0
    uncached = ScriptedModel(["r"])
    request = ModelRequest(system=system, messages=[], cache_system=False)
    assert complete(uncached, request).usage.input_tokens == estimate_tokens(system) == 100


def test_scripted_file_from_json_and_toml(tmp_path: Path) -> None:
    as_json = tmp_path / "replies.json"
    as_json.write_text(json.dumps(["view a.py", {"text": "done"}]))
    client = create_client(f"scripted:{as_json}")
    assert isinstance(client, ScriptedModel) and client.model == "replies"
    assert [complete(client, ask(str(n))).text for n in range(2)] == ["view a.py", "done"]

    as_toml = tmp_path / "ci.toml"
    as_toml.write_text('replies = ["one", { error = "flaky", retryable = true }, "two"]\n')
    client = create_client(f"scripted:{as_toml}")
    assert isinstance(client, ScriptedModel) and client.remaining == 3
    assert complete(client, ask("x")).text == "one"


def test_scripted_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"replies": [1]}')
    with pytest.raises(ConfigError, match=r"bad\.json"):
        create_client(f"scripted:{bad}")
    with pytest.raises(ConfigError, match="cannot read"):
        create_client(f"scripted:{tmp_path / 'missing.json'}")


def write_journal(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replay_from_journal(tmp_path: Path) -> None:
    journal = write_journal(
        tmp_path / "events.jsonl",
        [
            json.dumps({"type": "run_started", "seq": 1}),
            json.dumps({"type": "model_replied", "seq": 2, "text": "view calc.py"}),
            json.dumps({"type": "action_finished", "seq": 3}),
            "",
            json.dumps({"type": "model_replied", "seq": 4, "text": "done"}),
            '{"type": "model_replied", "te',  # torn by a crash mid-write
        ],
    )
    model = ReplayModel.from_journal(journal)
    assert model.replies == ["view calc.py", "done"]
    assert complete(model, ask("1")).text == "view calc.py"
    assert complete(model, ask("2")).text == "done"
    with pytest.raises(ReplayExhaustedError, match="all 2 recorded replies"):
        complete(model, ask("3"))


def test_replay_rejects_a_corrupt_journal_line(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "j.jsonl", ["{not json", json.dumps({"type": "x"})])
    with pytest.raises(CorruptTaskError, match=r"j\.jsonl:1"):
        ReplayModel.from_journal(journal)


def test_replay_provider_resolves_a_task_id(tmp_path: Path) -> None:
    journal = write_journal(
        tmp_path / "abc123.jsonl", [json.dumps({"type": "model_replied", "text": "hi"})]
    )
    client = create_client("replay:abc123", resolve_journal=lambda task: tmp_path / f"{task}.jsonl")
    assert complete(client, ask("x")).text == "hi"
    assert complete(create_client(f"replay:{journal}"), ask("x")).text == "hi"
    with pytest.raises(UsageError, match="journal of task 'nope'"):
        create_client("replay:nope")
