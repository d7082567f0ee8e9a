"""A task's configuration is typed (`TaskConfig`); a task stored before, as plain JSON, resumes.

The fixture `tests/fixtures/tasks/v2-config/` is a real task written by the
normalize before this change (schema 2): an untrusted workspace workflow
(`asker.toml`, run by name with `--approve yes --sandbox off`) stopped at its
question, its config (spec, recorded permissions, two permission notes) in a
file beside the task file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from durability_support import cli, task_file

from normalize.store import TaskStore
from normalize.store.migrations import migrate
from normalize.task import SCHEMA_VERSION, Task, TaskConfig

OLD = Path(__file__).parents[1] / "fixtures" / "tasks" / "v2-config"
OLD_ID = "1da525b8"


def install_old_task(home: Path, workspace: Path) -> None:
    tasks = home / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    data = json.loads((OLD / f"{OLD_ID}.json").read_text())
    data["workspace"] = str(workspace)
    (tasks / f"{OLD_ID}.json").write_text(json.dumps(data))
    shutil.copytree(OLD / OLD_ID, tasks / OLD_ID)


def test_the_fixture_is_a_schema_2_task_with_a_plain_config_beside_it() -> None:
    data = json.loads((OLD / f"{OLD_ID}.json").read_text())
    assert data["schema_version"] == 2 and "driver_config" not in data
    config = json.loads((OLD / OLD_ID / data["driver_config_file"]).read_text())
    assert sorted(config) == ["permission_notes", "permissions", "spec"]


def test_the_old_config_loads_typed(tmp_path: Path) -> None:
    install_old_task(tmp_path, tmp_path / "ws")
    task = TaskStore(tmp_path).load(OLD_ID)
    assert task.schema_version == SCHEMA_VERSION
    config = task.config
    assert config.spec is not None and config.spec["name"] == "asker"
    assert config.permissions is not None and config.permissions["mode"] == "yes"
    assert config.permissions["sandbox"] == "off"
    assert len(config.permission_notes) == 2 and "untrusted" in config.permission_notes[0]
    assert config.follow_ups == () and config.project_instructions and config.extra == {}


def test_the_old_task_resumes_and_is_saved_with_a_new_config_file(
        tmp_path: Path, normalize_home: Path) -> None:
    install_old_task(normalize_home, tmp_path)
    old_file = json.loads((OLD / f"{OLD_ID}.json").read_text())["driver_config_file"]
    done = cli("resume", OLD_ID, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 0, done.stdout + done.stderr
    # (the captured answer is the `ask` result, "The user answered: yes", written after the prefix)
    assert (tmp_path / "result.txt").read_text().endswith(": The user answered: yes\n")
    saved = task_file(normalize_home, OLD_ID)
    assert saved["schema_version"] == SCHEMA_VERSION and saved["status"] == "done"
    # the typed config writes the same bytes as the plain one did: the same file, by content
    assert saved["driver_config_file"] == old_file
    config = json.loads((normalize_home / "tasks" / OLD_ID / saved["driver_config_file"])
                        .read_text())
    assert TaskConfig.from_dict(config) == TaskStore(normalize_home).load(OLD_ID).config


def test_keys_nothing_declares_are_kept_under_extra_and_given_back_to_the_driver() -> None:
    data = json.loads((Path(__file__).parents[1] / "fixtures" / "tasks" / "v2.json")
                      .read_text())
    data["driver_config"] = {**data["driver_config"], "label": "mine", "approve": "yes",
                             "follow_ups": ["then the docs"], "project_instructions": False}
    task = Task.from_dict(migrate(data, source="v2.json"))
    config = task.config
    assert config.extra == {"label": "mine"} and config.approve == "yes"
    assert config.follow_ups == ("then the docs",) and config.project_instructions is False
    plain = config.to_driver_json()
    assert plain["label"] == "mine" and plain["follow_ups"] == ["then the docs"]
    assert "extra" not in plain and plain["spec"] == data["driver_config"]["spec"]
    assert TaskConfig.from_driver_json(plain) == config
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task
