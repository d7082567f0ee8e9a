"""validate-fix.toml fixes a failing test in a sample repository, the model scripted."""

from __future__ import annotations

from pathlib import Path

from helpers import REPO, make_sample_repo
from wf_support import Runner

from normalize.contract.driver import DriverServices
from normalize.testing import ScriptedModel

VALIDATE_FIX = REPO / "workflows" / "validate-fix.toml"

FIX = """The subtraction in add is the bug.
edit calc.py <<EOF
<<<<<<< SEARCH
    return a - b
=======
    return a + b
>>>>>>> REPLACE
EOF
done add adds again"""


def broken_repo(root: Path) -> Path:
    repo = make_sample_repo(root)
    calc = repo / "calc.py"
    calc.write_text(calc.read_text().replace("return a + b", "return a - b"))
    return repo


def test_validate_fix_fixes_the_failing_test(run_spec: Runner, workspace: Path) -> None:
    broken_repo(workspace)
    model = ScriptedModel(["view calc.py", FIX])
    services = DriverServices(model_factory=lambda spec, **kw: model)
    run = run_spec(VALIDATE_FIX, services=services)
    model.assert_done()
    assert run.outcome.status.value == "done", run.outcome.error
    assert run.outcome.summary == "the tests pass"
    assert "return a + b" in (workspace / "calc.py").read_text()
    states = [e.state for e in run.of("step_started")]
    assert states == ["checking", "fixing", "checking"]
    # the model saw the failing test output in its goal
    first = model.requests[0].messages[0]["content"]
    assert "The tests fail" in first and "test_add" in first
    assert [c.splitlines()[0] for c, _ in run.results] == [
        "test .", "view calc.py", "edit calc.py <<EOF", "test ."]
    assert [s for _, s in run.results] == ["error", "success", "success", "success"]
