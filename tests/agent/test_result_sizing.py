"""Results sized by intent: what the model asked to read comes back whole, the rest previewed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from agent_helpers import Run, scripted

LONG_FILE = "".join(f"value_{n} = {n * 7919}  # line {n + 1} of the module\n" for n in range(120))
NOISY = "\n".join(f"print('step {n}: ok')" for n in range(300))


def workspace(root: Path) -> Path:
    root.mkdir()
    (root / "table.py").write_text(LONG_FILE)
    (root / "noisy.py").write_text(NOISY + "\n")
    return root


def test_a_viewed_file_comes_back_whole_in_the_next_prompt(
        tmp_path: Path, run_agent: Callable[..., Run]) -> None:
    repo = workspace(tmp_path / "repo")
    model, factory = scripted("Reading it.\nview table.py", "Now the range.\nview table.py:50-60",
                              "Noisy run.\nrun " + sys.executable + " noisy.py", "done read")
    run = run_agent(repo, factory=factory, approve="yes", sandbox="off")
    assert run.outcome.status.value == "done"
    after_view = model.requests[1].messages[-1]["content"]
    assert "value_119 = " in after_view  # the 120th line: the whole file, no preview
    assert "fetch r" not in after_view
    after_range = model.requests[2].messages[-1]["content"]
    assert "value_49 = " in after_range and "value_59 = " in after_range
    # the file shrank to its one history line once a later turn came
    assert "value_119 = " not in after_range
    assert "view table.py → " in after_range
    # incidental long output (a program's) keeps the error-first preview and an id
    after_run = model.requests[3].messages[-1]["content"]
    assert "step 5: ok" in after_run and "step 299: ok" not in after_run
    assert "more lines — fetch r" in after_run


def test_the_asked_bound_is_a_setting(tmp_path: Path, run_agent: Callable[..., Run]) -> None:
    repo = workspace(tmp_path / "repo")
    model, factory = scripted("Reading it.\nview table.py", "done read")
    run = run_agent(repo, factory=factory, cache={"asked_lines": 50})
    assert run.outcome.status.value == "done"
    shown = model.requests[1].messages[-1]["content"]
    assert "value_119 = " not in shown  # past the bound: view answers with its head/outline
