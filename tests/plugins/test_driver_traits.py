"""Driver traits, not names: a stranger's driver that declares `TakesModel` takes `--model`,
the way `llm` and the harnesses do, and one that does not is refused by the same rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from normalize.contract.driver import (
    ChecksOutput,
    DriverTraits,
    ReadsTypedLines,
    ShowsResults,
    TakesFollowUps,
    TakesModel,
    driver_traits,
)
from normalize.store import TaskStore
from normalize.task import Task, TaskStatus

MODULE = '''"""A third party's driver that a model drives: it says which model it was given."""

from normalize import Decision


class ModelledDriver:
    name = "modelled"
    model_settings = "llm"  # TakesModel: --model goes to the task's model settings

    def __init__(self, model):
        self.model = model

    @classmethod
    def from_config(cls, config, services):
        llm = {**((config.get("spec") or {}).get("llm") or {}), **(config.get("llm") or {})}
        return cls(str(llm.get("model", "")))

    def decide(self, task, ctx):
        return Decision.finish(f"driven by {self.model}")

    def on_result(self, task, action, result):
        pass

    def snapshot(self):
        return {}

    def restore(self, state):
        pass
'''


def install(site: Path) -> Path:
    """The modelled driver's distribution: its module and a dist-info with the entry point."""
    dist = site / "modelled_driver-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: modelled-driver\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[normalize.drivers]\nmodelled = modelled_driver:ModelledDriver\n")
    (site / "modelled_driver.py").write_text(MODULE)
    return site


def cli(home: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(site)]))
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=home,
                          env={**os.environ, "NORMALIZE_HOME": str(home), "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=60, check=False)


def stopped_task(home: Path) -> Task:
    store = TaskStore(home, fsync=False)
    task = Task.new("say which model", str(home), "workflow", status=TaskStatus.INTERRUPTED)
    store.create(task)
    return task


def test_a_strangers_driver_that_takes_a_model_accepts_model(tmp_path: Path) -> None:
    site, home = install(tmp_path / "site"), tmp_path / "home"
    home.mkdir()
    task = stopped_task(home)
    refused = cli(home, site, "resume", task.id, "--driver", "stranger", "--model",
                  "scripted:replies.json", "-q")
    assert refused.returncode == 2, refused.stderr
    assert "--model goes with --driver llm, claude, codex, aider, modelled" in refused.stderr
    done = cli(home, site, "resume", task.id, "--driver", "modelled", "--model",
               "scripted:replies.json", "-q")
    assert done.returncode == 0, done.stderr
    saved = TaskStore(home, fsync=False).load(task.id)
    assert saved.driver == "modelled" and saved.summary == "driven by scripted:replies.json"


def test_traits_are_read_from_the_class_once() -> None:
    llm = driver_traits("llm")
    assert llm == DriverTraits(model_settings="llm", follow_ups=True, typed_lines=True,
                               checks_output=True, remembers=True)
    assert driver_traits("llm") is llm  # read when the class was loaded, kept since
    assert driver_traits("claude") == DriverTraits(model_settings="harness", follow_ups=True,
                                                   remembers=True)
    assert driver_traits("user") == DriverTraits(shows_results=True)
    assert driver_traits("workflow") == DriverTraits() == driver_traits("stranger")
    assert driver_traits("stranger-broken") == DriverTraits() == driver_traits("nobody")
    for trait in (TakesModel, TakesFollowUps, ReadsTypedLines, ChecksOutput, ShowsResults):
        assert not isinstance(object, trait)
