"""A stored workflow spec: compact steps, decoded one by one when a resumed run reaches them."""

from __future__ import annotations

import json
from dataclasses import asdict

from normalize.tables import RetrySettings
from normalize.workflow.spec import StepList, StepSpec, WorkflowSpec


def spec(steps: int) -> WorkflowSpec:
    return WorkflowSpec(name="flow", path="flow.toml", driver="workflow", steps=[
        StepSpec(name="group", steps=[StepSpec(name="inner", action="view a.py",
                                               retry=RetrySettings(max_attempts=2))],
                 otherwise=[StepSpec(name="else", action="note no", parallel=True)]),
        *(StepSpec(name=f"s{i}", action=f"note {i}", line=i) for i in range(steps)),
    ])


def stored(workflow: WorkflowSpec) -> dict[str, object]:
    return json.loads(json.dumps(workflow.to_dict()))


def test_a_spec_read_back_decodes_only_the_steps_it_is_asked_for() -> None:
    back = WorkflowSpec.from_dict(stored(spec(1000)))
    assert isinstance(back.steps, StepList) and back.steps.decoded() == 0
    assert len(back.steps) == 1001
    assert back.steps[500] == StepSpec(name="s499", action="note 499", line=499)
    assert back.steps.decoded() == 1
    assert back.steps[0].steps[0].retry == RetrySettings(max_attempts=2)  # nested: decoded too
    assert back.steps[0].otherwise[0].parallel is True
    assert back.steps.decoded() == 2


def test_the_stored_steps_round_trip_and_hold_only_what_is_set() -> None:
    original = spec(3)
    data = stored(original)
    assert data["steps"][1] == {"name": "s0", "action": "note 0"}  # type: ignore[index]
    back = WorkflowSpec.from_dict(data)
    assert back == original and list(back.steps) == list(original.steps)
    assert stored(back) == data  # untouched steps are written back as they were read
    back.steps[2]
    assert stored(back) == data


def test_a_spec_stored_with_every_field_still_loads() -> None:
    # configs written before steps were stored compactly hold every field of every step
    original = spec(2)
    full = {**asdict(original), "steps": [asdict(step) for step in original.steps]}
    back = WorkflowSpec.from_dict(json.loads(json.dumps(full)))
    assert list(back.steps) == list(original.steps)
