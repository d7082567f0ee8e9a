"""Helpers and fixtures for the agent tests: a repository with a type error, model runs."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support import json_lines as json_lines  # (shared: tests import it from here too)
from support.cli import cli as run_cli

from normalize.contract.driver import DriverServices
from normalize.drivers.llm import LLMDriver
from normalize.engine import RunOutcome
from normalize.events import BaseEvent
from normalize.keys import parse_table
from normalize.retry import RetryPolicy
from normalize.runner import RunOptions, load_spec, make_driver, run_task, start_task
from normalize.store import TaskStore
from normalize.tables import CacheSettings, ContextSettings, LLMTable
from normalize.task import Limits
from normalize.testing import ScriptedModel
from normalize.testing.servers import FakeModelServer

VENV_BIN = str(Path(sys.executable).parent)
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-test"}
FAST = RetryPolicy(strategy="exponential", max_attempts=3, base_delay=0.01, max_delay=0.02)

BROKEN = '''def add(a: int, b: int) -> int:
    return a + b


def mean(xs: list[int]) -> float:
    return add(xs[0], "1") / len(xs)
'''

FIX = '''Passing an int fixes the call.
edit calc.py <<EOF
<<<<<<< SEARCH
    return add(xs[0], "1") / len(xs)
=======
    return add(xs[0], 1) / len(xs)
>>>>>>> REPLACE
EOF'''

FIX_SCRIPT = [
    "mypy says mean passes a str to add. Let me look.\nview calc.py",
    FIX,
    "Checking with the type checker.\nrun python -m mypy calc.py",
    "done Fixed the type error in calc.py: mean passed a str to add",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A workspace whose calc.py has a type error mypy reports."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(BROKEN)
    return root


@pytest.fixture
def venv_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python` on PATH is this interpreter (it has mypy), as it is for a user in the venv."""
    monkeypatch.setenv("PATH", VENV_BIN + os.pathsep + os.environ.get("PATH", ""))


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
    assert fake.errors == []


@dataclass
class Run:
    """One task run in this process: the outcome, every event, the store."""

    outcome: RunOutcome
    events: list[BaseEvent]
    store: TaskStore
    driver: LLMDriver
    journal: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """Journaled events of one type."""
        return [e for e in self.journal if e["type"] == kind]


Factory = Callable[..., Any]


@pytest.fixture
def run_agent(normalize_home: Path) -> Callable[..., Run]:
    """Run the dwim workflow on `workspace` with `llm` settings and a model factory."""

    def run(workspace: Path, goal: str = "fix the type error", *, factory: Factory | None = None,
            llm: dict[str, Any] | None = None, context: dict[str, Any] | None = None,
            limits: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
            task_id: str | None = None, resume: bool = False,
            cache: dict[str, Any] | None = None, **run_options: Any) -> Run:
        store = TaskStore(normalize_home, fsync=False)
        events: list[BaseEvent] = []
        opts = RunOptions(workspace=workspace, subscribers=[events.append], store=store,
                          fsync=False, services=DriverServices(
                              model_factory=factory, **(options or {"model_retry": FAST})),
                          **run_options)
        if resume:
            assert task_id is not None
            task = store.load(task_id)
        else:
            spec = load_spec("dwim", workspace)
            spec.llm = LLMTable.from_config({**(spec.llm.to_dict() if spec.llm else {}),
                                             "fallback": [], **(llm or {})})
            if context is not None:
                spec.context = parse_table(ContextSettings, context, "workflow.context")
            if limits is not None:
                spec.limits = parse_table(Limits, limits, "workflow.limits")
            if cache is not None:
                spec.cache = parse_table(CacheSettings, cache, "workflow.cache")
            task = start_task(spec, goal, opts)
        driver = make_driver(task, opts)
        assert isinstance(driver, LLMDriver)
        try:
            outcome = run_task(task, opts, driver=driver, resumed=resume)
        finally:
            driver.close()
        return Run(outcome, events, store, driver, list(store.events(task.id)))

    return run


def scripted(*steps: Any) -> tuple[ScriptedModel, Factory]:
    """A ScriptedModel and a model factory that always hands it out."""
    model = ScriptedModel(list(steps), model="test")

    def factory(spec: str, **_: Any) -> ScriptedModel:
        return model

    return model, factory


def mypy_passes(workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "calc.py"], cwd=workspace,
                          capture_output=True, text=True, timeout=120)


cli = partial(run_cli, drop=(), term=None, timeout=120, first_on_path=VENV_BIN)
"""`normalize ARGS` (`support.cli`) with its own NORMALIZE_HOME and this venv's bin first on
PATH (a test gives another `first_on_path`, or names to `drop`)."""


def _controlling_terminal() -> None:
    """The pty becomes the child's controlling terminal: Ctrl-C typed at it is a SIGINT."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`normalize ARGS` on a real pseudo-terminal; the test types at it and reads the screen."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.leader, self.follower = pty.openpty()
        termios.tcsetwinsize(self.follower, (40, 100))
        self.proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd,
                                     env=env, stdin=self.follower, stdout=self.follower,
                                     stderr=self.follower, start_new_session=True,
                                     preexec_fn=_controlling_terminal)
        self.seen = b""

    def type(self, text: str) -> None:
        os.write(self.leader, text.encode())

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        """Read the screen until `text` shows up (fails with what was seen)."""
        want = text.encode()
        deadline = time.monotonic() + timeout
        while want not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and not self._ready(0.2)):
                raise AssertionError(f"never saw {text!r}; the screen had:\n"
                                     + self.seen.decode(errors="replace")[-3000:])
            if self._ready(min(left, 0.5)):
                try:
                    self.seen += os.read(self.leader, 65536)
                except OSError:
                    pass

    def _ready(self, timeout: float) -> bool:
        return bool(select.select([self.leader], [], [], timeout)[0])

    def finish(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self._ready(0.2):  # keep draining, or a full pty blocks the child
                try:
                    self.seen += os.read(self.leader, 65536)
                except OSError:
                    break
        return self.proc.wait(timeout=5)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.leader)
        os.close(self.follower)
