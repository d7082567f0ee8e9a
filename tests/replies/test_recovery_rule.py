"""When a resume lets the model decide again: only when the stop left something it has not seen."""

from __future__ import annotations

from pathlib import Path

from normalize.events import ActionFinished
from normalize.recovery import unseen_trouble
from normalize.task import Action, Decision
from normalize.tools import default_tools
from normalize.tools.base import ToolRegistry


def ended(status: str) -> ActionFinished:
    """An action's finish as the journal decodes it, with `status`."""
    return ActionFinished(key="0.0", tool="run", status=status)

def tools(tmp_path: Path) -> ToolRegistry:
    del tmp_path
    return default_tools()


def decision(parallel: bool = False) -> Decision:
    actions = [Action("view", {"args": ["a.py"]}, "view a.py", key="0.0"),
               Action("run", {"args": ["touch", "b"]}, "run touch b", key="0.1"),
               Action("run", {"args": ["touch", "c"]}, "run touch c", key="0.2")]
    return Decision(actions=actions, parallel=parallel)


def test_a_side_effect_started_and_not_finished_is_trouble(tmp_path: Path) -> None:
    done = {"0.0": ended("success")}
    assert unseen_trouble(tools(tmp_path), decision(), done, {"0.0", "0.1"})


def test_a_failure_in_an_in_order_decision_is_trouble(tmp_path: Path) -> None:
    failed = {"0.0": ended("error")}
    assert unseen_trouble(tools(tmp_path), decision(), failed, {"0.0"})
    assert not unseen_trouble(tools(tmp_path), decision(parallel=True), failed, {"0.0"})


def test_a_stop_between_actions_that_finished_well_is_no_trouble(tmp_path: Path) -> None:
    done = {"0.0": ended("success"), "0.1": ended("success")}
    assert not unseen_trouble(tools(tmp_path), decision(), done, {"0.0", "0.1"})
    # a read that never finished changed nothing: it simply runs again
    assert not unseen_trouble(tools(tmp_path), decision(), {}, {"0.0"})
