"""A resumed task's config file is written anew exactly when a change is announced."""

from __future__ import annotations

import json
from pathlib import Path

from normalize.runner import follow_up, switch_model
from normalize.store import TaskStore
from normalize.task import Task, TaskConfig


def saved(store: TaskStore, task: Task) -> str:
    """Save `task` as a run does; the config file its task file names."""
    lock = store.lock(task.id)
    lock.acquire(epoch=task.epoch + 1)
    try:
        store.save(task, lock=lock)
    finally:
        lock.release()
    return str(json.loads(store.task_path(task.id).read_bytes())["driver_config_file"])


def test_a_model_switch_and_a_follow_up_each_write_a_new_config(tmp_path: Path) -> None:
    task = Task(id="abc12345", goal="g", workspace="/tmp", driver="llm",
                config=TaskConfig(spec={"steps": [{"name": "a"}]}, llm={"model": "a"}))
    first = saved(TaskStore(tmp_path, fsync=False), task)
    store = TaskStore(tmp_path, fsync=False)
    again = store.load(task.id)
    assert saved(store, again) == first  # unchanged: the file it came from, not re-encoded
    store = TaskStore(tmp_path, fsync=False)
    switched = store.load(task.id)
    switch_model(switched, "b")
    second = saved(store, switched)
    assert second != first
    store = TaskStore(tmp_path, fsync=False)
    told = store.load(task.id)
    follow_up(told, "and then the docs")
    assert saved(store, told) not in (first, second)
    fresh = TaskStore(tmp_path).load(task.id).config.to_driver_json()
    assert fresh["llm"] == {"model": "b"} and fresh["follow_ups"] == ["and then the docs"]
