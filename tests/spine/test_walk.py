"""A task's walk through `run_task`: each module once, and nothing below calls back up.

`sys.setprofile` (and `threading.setprofile`, for the engine's worker threads)
watches a scripted run. Two things are read from every call of a `normalize`
function, by module (the granularity the import graph pins):

- the walk: the modules `normalize.runner`'s own frames call, in order. It
  stays in each module once: the runner goes down into a module, comes back,
  and never has to go down into it again, because each set-up step lives
  beside its data (`docs/architecture.md`, "A task's walk through
  `run_task`"). Core values and utilities every layer reads (`LEAVES`) are
  not steps of the walk.
- the re-entries: a `normalize.runner` function called by a frame of another
  `normalize` module. Once the runner has handed the task down (to the
  permissions, the driver's `from_config`, the engine), nothing down there
  calls back into it: no subscriber, loan or callback of the runner's.

Frames of other packages in between (`dataclasses.replace` calling an
`__init__`, a `contextlib` wrapper) are looked through to the nearest
`normalize` frame, so neither check depends on how a call is dispatched.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from normalize.runner import RunOptions, load_spec, run_task, start_task
from normalize.store import TaskStore

RUNNER = "normalize.runner"
# core values and utilities every layer reads: their calls are not steps of the walk
LEAVES = frozenset({
    "normalize.task", "normalize.events", "normalize.redact", "normalize.fsutil",
    "normalize.fsopen", "normalize.serial", "normalize.homes", "normalize.errors",
    "normalize.keys", "normalize.tables", "normalize.cancel", "normalize.programs",
})


def _module(frame: FrameType) -> str:
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) else ""


def _caller(frame: FrameType) -> FrameType | None:
    """The nearest `normalize` frame below `frame` (other packages' frames looked through)."""
    below = frame.f_back
    while below is not None and not _module(below).startswith("normalize"):
        below = below.f_back
    return below


@dataclass
class Walk:
    steps: list[str] = field(default_factory=list)  # modules the runner called, repeats merged
    reentries: list[str] = field(default_factory=list)  # "module.function -> runner.function"

    def see(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = _module(frame)
        if not module.startswith("normalize") or frame.f_code.co_name == "<module>":
            return  # an import runs a module's body: loading, not a step (it runs once)
        caller = _caller(frame)
        if caller is None:
            return  # the test calling run_task
        below = _module(caller)
        if module == RUNNER and below != RUNNER:
            call = f"{below}.{caller.f_code.co_name} -> {module}.{frame.f_code.co_name}"
            if call not in self.reentries:
                self.reentries.append(call)
        elif below == RUNNER and module != RUNNER and module not in LEAVES:
            if not self.steps or self.steps[-1] != module:
                self.steps.append(module)


@contextmanager
def watched() -> Iterator[Walk]:
    walk = Walk()
    profile: Callable[[FrameType, str, Any], None] = walk.see
    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        yield walk
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_run_task_stays_in_each_module_once_and_nothing_calls_back_up(
        tmp_path: Path, normalize_home: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    script = tmp_path / "script.json"
    script.write_text('["view a.txt", "done read it"]')
    flow = workspace / "agent.toml"
    # a repo map lent to the driver, and a workspace file's hooks left out with a note:
    # the two loans of the runner that used to call back into it from below
    flow.write_text('[workflow]\nname = "agent"\n[workflow.llm]\nprovider = "scripted"\n'
                    f'model = "{script}"\n[workflow.context]\nrepo_map = 400\n'
                    '[[workflow.hooks]]\nevent = "run_end"\ncommand = ["true"]\n')
    options = RunOptions(workspace=workspace, store=TaskStore(normalize_home, fsync=False),
                         fsync=False, approve="yes", sandbox="off")
    task = start_task(load_spec(str(flow), workspace, paths_trusted=False), "read a.txt",
                      options)
    with watched() as walk:
        outcome = run_task(task, options)
    assert outcome.status.value == "done", outcome.error
    shown = " -> ".join(walk.steps)
    assert not walk.reentries, f"runner.py called back from below: {walk.reentries}"
    twice = sorted({m for m in walk.steps if walk.steps.count(m) > 1})
    assert not twice, f"the walk goes down into {twice} more than once: {shown}"
    assert walk.steps[-1] == "normalize.engine", shown  # set up, then left for the engine
    # the notes of what the workspace's file could not have still reach the person
    notices = [e["message"] for e in TaskStore(normalize_home).events(task.id)
               if e["type"] == "notice"]
    assert any("ignored 1 hook(s)" in n for n in notices), notices
