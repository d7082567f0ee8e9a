"""A task stored before the `[workflow]` sub-tables were typed reads them back typed, and resumes.

The fixture `tests/fixtures/tasks/v3-tables/` is a real task written by the
normalize before this change: `tables.toml` (beside it; context, cache,
retry, limits and permissions set) run with `--approve yes --sandbox off`,
stopped at its question. Its stored spec holds the tables as the file gave
them (plain JSON).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from durability_support import cli, task_file

from normalize.store import TaskStore
from normalize.tables import CacheSettings, ContextSettings, PermissionsTable, RetrySettings
from normalize.task import Limits
from normalize.workflow.spec import WorkflowSpec

OLD = Path(__file__).parents[1] / "fixtures" / "tasks" / "v3-tables"
OLD_ID = "cf065347"


def install(home: Path, workspace: Path) -> None:
    tasks = home / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    data = json.loads((OLD / f"{OLD_ID}.json").read_text())
    data["workspace"] = str(workspace)
    (tasks / f"{OLD_ID}.json").write_text(json.dumps(data))
    shutil.copytree(OLD / OLD_ID, tasks / OLD_ID)


def test_the_stored_tables_read_back_as_typed_values(tmp_path: Path) -> None:
    install(tmp_path, tmp_path / "ws")
    config = TaskStore(tmp_path).load(OLD_ID).config
    assert config.spec is not None
    spec = WorkflowSpec.from_dict(config.spec)
    assert spec.context == ContextSettings(strategy="flat")
    assert spec.cache == CacheSettings(strategy="memory", ttl_seconds=60, preview_length=300)
    assert spec.retry == RetrySettings(strategy="fixed", max_attempts=2, base_delay=0)
    assert spec.limits == Limits(max_turns=20, timeout_seconds=600)
    assert spec.permissions == PermissionsTable(mode="yes", deny=("rm *",))
    assert spec.llm is None and spec.mcp == () and [s.name for s in spec.steps] == \
        ["look", "question", "write"]


def test_the_old_task_resumes_to_its_end(tmp_path: Path, normalize_home: Path) -> None:
    install(normalize_home, tmp_path)
    done = cli("resume", OLD_ID, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "result.txt").read_text() == "The user answered: yes\n"
    saved = task_file(normalize_home, OLD_ID)
    assert saved["status"] == "done"
    assert saved["limits"]["max_turns"] == 20  # the workflow's limits, as the task began
