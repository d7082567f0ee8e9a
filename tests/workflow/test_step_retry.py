"""A step's `retry` is typed like `[workflow.retry]`: a `RetrySettings`, checked at its line,
stored as the keys the file set, and read back typed from a stored task's spec."""

from __future__ import annotations

import pytest

from normalize.errors import ConfigError
from normalize.tables import RetrySettings
from normalize.workflow.loader import load_workflow_text
from normalize.workflow.spec import WorkflowSpec


def step(retry: str) -> str:
    return f'[workflow]\nname = "r"\n\n[[workflow.steps]]\naction = "run true"\nretry = {retry}\n'


def test_a_steps_retry_is_a_typed_table_that_round_trips() -> None:
    spec = load_workflow_text(step('{ strategy = "fixed", max_attempts = 2 }'), label="r.toml")
    assert spec.steps[0].retry == RetrySettings(strategy="fixed", max_attempts=2)
    stored = spec.to_dict()
    assert stored["steps"][0]["retry"] == {"strategy": "fixed", "max_attempts": 2}
    assert WorkflowSpec.from_dict(stored).steps[0].retry == spec.steps[0].retry
    named = load_workflow_text(step('"exponential"'), label="r.toml")
    assert named.steps[0].retry == RetrySettings(strategy="exponential")
    assert load_workflow_text(step('"none"').replace("retry = \"none\"\n", ""),
                              label="r.toml").steps[0].retry is None


@pytest.mark.parametrize(("retry", "said"), [
    ("{ strategy = \"fixed\", tries = 2 }", "unknown key 'tries' in [workflow.steps.0.retry]"),
    ("{ max_attempts = 0 }", "'max_attempts' must be positive, not 0"),
    ("{ base_delay = \"soon\" }", "'base_delay' must be a number, not a string"),
    ('"sometimes"', "unknown retry strategy 'sometimes'"),
])
def test_a_bad_step_retry_is_one_line_naming_file_and_line(retry: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_workflow_text(step(retry), label="r.toml")
    assert str(caught.value).startswith(f"r.toml:6:1: {said}"), str(caught.value)
