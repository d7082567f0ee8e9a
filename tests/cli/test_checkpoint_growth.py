"""Checkpoints do not grow with a workflow's length (what the benchmark's targets rest on)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from normalize.errors import CorruptTaskError
from normalize.runner import RunOptions, run_task, start_task
from normalize.store import TaskStore, config_changed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from engine import noop_spec


def run(steps: int, home: Path, work: Path) -> tuple[TaskStore, str, list[int]]:
    """Run a no-op workflow; the store, the task id and the size of every checkpoint."""
    sizes: list[int] = []

    class Sizes(TaskStore):
        def save(self, *args: object, **kwargs: object) -> int:
            size = super().save(*args, **kwargs)  # type: ignore[arg-type]
            sizes.append(size)
            return size

    store = Sizes(home, fsync=False)
    options = RunOptions(workspace=work, store=store, fsync=False)
    task = start_task(noop_spec(steps), "bench", options)
    assert run_task(task, options).status.value == "done"
    return store, task.id, sizes


def test_the_task_file_stays_small_and_the_spec_comes_back(tmp_path: Path) -> None:
    store, task_id, sizes = run(400, tmp_path / "home", tmp_path)
    # the scope's bounded history fills up first; from then on every checkpoint is alike
    assert sizes[350] <= sizes[100] * 1.05  # only longer numbers (seq, offsets)
    assert max(sizes) < 8192  # the 400-step spec (100 kB) is not in the checkpoint
    raw = json.loads(store.task_path(task_id).read_text())
    assert "driver_config" not in raw and raw["driver_config_file"].startswith("config-")
    loaded = store.load(task_id)
    assert loaded.config.spec == noop_spec(400).to_dict()


def test_a_missing_config_file_is_a_damaged_task(tmp_path: Path) -> None:
    store, task_id, _ = run(3, tmp_path / "home", tmp_path)
    for config in (store.tasks_dir / task_id).glob("config-*.json"):
        config.unlink()
    with pytest.raises(CorruptTaskError, match=r"driver config .* is missing"):
        store.load(task_id)


def test_a_resumed_task_keeps_or_rewrites_its_config_as_it_changed(tmp_path: Path) -> None:
    from normalize.task import Limits

    home = tmp_path / "home"
    options = RunOptions(workspace=tmp_path, store=TaskStore(home, fsync=False), fsync=False)
    task = start_task(noop_spec(3), "bench", options, limits=Limits(max_turns=1))
    assert run_task(task, options).status.value == "limit_reached"

    def configs() -> list[str]:
        return sorted(p.name for p in (home / "tasks" / task.id).glob("config-*"))

    first = configs()
    assert len(first) == 1

    store = TaskStore(home, fsync=False)  # resumed unchanged: the same config file
    again = store.load(task.id)
    again.limits.max_turns = 2
    resumed = RunOptions(workspace=tmp_path, store=store, fsync=False)
    assert run_task(again, resumed, resumed=True).status.value == "limit_reached"
    assert configs() == first

    store = TaskStore(home, fsync=False)  # changed in place before the run: a new file
    changed = store.load(task.id)
    changed.config.spec["description"] = "changed on resume"
    config_changed(changed)  # a change in place is announced
    changed.limits.max_turns = None
    resumed = RunOptions(workspace=tmp_path, store=store, fsync=False)
    assert run_task(changed, resumed, resumed=True).status.value == "done"
    assert len(configs()) == 2
    fresh = TaskStore(home).load(task.id)
    assert fresh.config.spec["description"] == "changed on resume"
