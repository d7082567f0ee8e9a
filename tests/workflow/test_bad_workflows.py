"""A corpus of malformed workflow files, each rejected with its exact `FILE:LINE:COL: message`.

Each fixture under tests/fixtures/workflows/bad/ states its expected error on
its first line (`# expect: …`, `{dir}` standing for the fixture directory and
`{drivers}` for the registered drivers, plugins installed here included).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, cli

from normalize.contract.driver import DRIVERS
from normalize.errors import ConfigError, ExitStatus
from normalize.workflow.loader import load_workflow

BAD = (REPO / "tests" / "fixtures" / "workflows" / "bad").resolve()
FIXTURES = sorted(BAD.glob("*.toml"))


def expected(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} lacks its `# expect:` line"
    drivers = ", ".join(DRIVERS.names())
    return first.removeprefix("# expect: ").replace("{dir}", str(BAD)).replace("{drivers}", drivers)


def test_the_corpus_is_big_enough() -> None:
    assert len(FIXTURES) >= 25


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_malformed_workflow_is_rejected_with_its_position(path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_workflow(path)
    assert str(caught.value) == expected(path)
    assert caught.value.exit_status is ExitStatus.USAGE


def test_workflows_validate_reports_every_file_and_exits_2(tmp_path: Path,
                                                          normalize_home: Path) -> None:
    good = REPO / "workflows" / "health.toml"
    proc = cli("workflows", "validate", str(good), *map(str, FIXTURES), cwd=tmp_path,
               home=normalize_home)
    assert proc.returncode == 2
    assert proc.stdout == f"{good}: ok (workflow, 3 steps)\n"
    assert proc.stderr.splitlines() == [expected(p) for p in FIXTURES]
    assert "Traceback" not in proc.stderr


def test_run_refuses_a_malformed_workflow_before_running_anything(
        tmp_path: Path, normalize_home: Path) -> None:
    path = BAD / "unknown_state.toml"
    proc = cli("run", str(path), cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"normalize: error: {expected(path)}"
    assert not (normalize_home / "tasks").exists() or not any((normalize_home / "tasks").iterdir())
