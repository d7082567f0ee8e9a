"""When a resume lets the model decide again: only when the stop left something it has not seen."""

from __future__ import annotations

from pathlib import Path

from normalize.recovery import Recovery
from normalize.task import Action, Decision
from normalize.tools import default_tools


def engine(tmp_path: Path) -> Recovery:
    del tmp_path
    recovery = Recovery()
    recovery.tools = default_tools()
    return recovery


def decision(parallel: bool = False) -> Decision:
    actions = [Action("view", {"args": ["a.py"]}, "view a.py", key="0.0"),
               Action("run", {"args": ["touch", "b"]}, "run touch b", key="0.1"),
               Action("run", {"args": ["touch", "c"]}, "run touch c", key="0.2")]
    return Decision(actions=actions, parallel=parallel)


def test_a_side_effect_started_and_not_finished_is_trouble(tmp_path: Path) -> None:
    done = {"0.0": {"status": "success"}}
    assert engine(tmp_path)._unseen_trouble(decision(), done, {"0.0", "0.1"})


def test_a_failure_in_an_in_order_decision_is_trouble(tmp_path: Path) -> None:
    failed = {"0.0": {"status": "error"}}
    assert engine(tmp_path)._unseen_trouble(decision(), failed, {"0.0"})
    assert not engine(tmp_path)._unseen_trouble(decision(parallel=True), failed, {"0.0"})


def test_a_stop_between_actions_that_finished_well_is_no_trouble(tmp_path: Path) -> None:
    done = {"0.0": {"status": "success"}, "0.1": {"status": "success"}}
    assert not engine(tmp_path)._unseen_trouble(decision(), done, {"0.0", "0.1"})
    # a read that never finished changed nothing: it simply runs again
    assert not engine(tmp_path)._unseen_trouble(decision(), {}, {"0.0"})
