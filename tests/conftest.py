"""Suite-wide fixtures: an isolated data home, a stranger's plugin, and no leftover processes.

The whole suite runs with a foreign normalize plugin installed (a dist-info on
sys.path and on PYTHONPATH for the programs tests start; two of its entry
points fail to import), so no test can pass only because the environment
happens to hold nothing but normalize. And no
test may leave a child process running: one found after a test is killed and
the test fails, named.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FOREIGN_DIST = "stranger_normalize_plugin"
FOREIGN_ENTRY_POINTS = """\
[normalize.drivers]
stranger = stranger_normalize_plugin:StrangerDriver
stranger-broken = stranger_normalize_plugin_gone:Driver

[normalize.steps]
stranger-step = stranger_normalize_plugin:step

[normalize.conditions]
stranger-condition = stranger_normalize_plugin:condition
stranger-broken = stranger_normalize_plugin_gone:condition

[normalize.sources]
stranger-source = stranger_normalize_plugin:source

[normalize.stranger-group]
anything = stranger_normalize_plugin:StrangerDriver
"""
FOREIGN_MODULE = '''"""A third party's normalize plugin: present in every test, used by none."""


class StrangerDriver:
    name = "stranger"

    @classmethod
    def from_config(cls, config, services):
        return cls()

    def decide(self, task, ctx):
        return None

    def on_result(self, task, action, result):
        pass

    def snapshot(self):
        return {}

    def restore(self, state):
        pass


def step(*args, **kwargs):
    return None


def condition(*args, **kwargs):
    return False


def source(*args, **kwargs):
    return []
'''


def install_foreign_plugin(site: Path) -> Path:
    """Write the stranger's distribution (module + dist-info with entry points) into `site`."""
    dist = site / f"{FOREIGN_DIST}-9.9.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {FOREIGN_DIST.replace('_', '-')}\nVersion: 9.9\n")
    (dist / "entry_points.txt").write_text(FOREIGN_ENTRY_POINTS)
    (site / f"{FOREIGN_DIST}.py").write_text(FOREIGN_MODULE)
    return site


@pytest.fixture(scope="session", autouse=True)
def foreign_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A stranger's plugin installed for the whole session, in-process and for subprocesses."""
    import importlib

    from normalize import plugins

    site = install_foreign_plugin(tmp_path_factory.mktemp("foreign-site"))
    previous = os.environ.get("PYTHONPATH")
    sys.path.append(str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [previous, str(site)]))
    importlib.invalidate_caches()
    plugins.reset_all()
    yield site
    sys.path.remove(str(site))
    if previous is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = previous
    plugins.reset_all()


def _children() -> dict[int, int]:
    """pid → parent pid of every living (not zombie) process, read from /proc."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            out[int(entry)] = int(fields[1])
    return out


def descendants(root: int) -> set[int]:
    """Every living process below `root`."""
    parents = _children()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


_running_test = ["(collection)"]
_popen_init = subprocess.Popen.__init__
_popen_del = subprocess.Popen.__del__


def _popen_init_named(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    self._started_in = _running_test[0]  # type: ignore[attr-defined]


def _popen_del_named(self: subprocess.Popen[Any]) -> None:
    # Python warns "subprocess N is still running" from whichever test the collector runs in;
    # say which test started it and what it runs, so the leak is found where it was made
    if self.returncode is None and self.poll() is None:
        sys.stderr.write(f"a Popen was collected while its process ran: {self.args!r:.300}, "
                         f"started in {getattr(self, '_started_in', '?')}\n")
    _popen_del(self)


subprocess.Popen.__init__ = _popen_init_named  # type: ignore[method-assign]
subprocess.Popen.__del__ = _popen_del_named  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def no_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail (and kill, by pid) any process a test started and left running."""
    _running_test[0] = request.node.nodeid
    if not os.path.isdir("/proc"):
        yield
        return
    before = descendants(os.getpid())
    yield
    left = descendants(os.getpid()) - before
    deadline = time.monotonic() + 2.0
    while left and time.monotonic() < deadline:  # a child being reaped right now
        time.sleep(0.05)
        left &= descendants(os.getpid())
    if not left:
        return
    described = [f"{pid} ({_command(pid)})" for pid in sorted(left)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        try:
            os.waitpid(pid, 0)  # our own child: reap it; a grandchild goes to init
        except ChildProcessError:
            pass
    pytest.fail(f"{request.node.nodeid} left processes running: {', '.join(described)}",
                pytrace=False)


@pytest.fixture(autouse=True)
def normalize_home(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An isolated NORMALIZE_HOME, so no test touches the real user data dir."""
    home = tmp_path_factory.mktemp("nhome")
    monkeypatch.setenv("NORMALIZE_HOME", str(home))
    monkeypatch.delenv("NORMALIZE_CRASH_AT", raising=False)
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "TRACEPARENT"):  # a CI runner's collector never gets the suite's traces
        monkeypatch.delenv(name, raising=False)
    yield home


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            exitstatus: int, config: pytest.Config) -> None:
    """In CI (`CI=true`) a skipped test fails the run: `.ci/run` installs what every test needs."""
    skipped = terminalreporter.stats.get("skipped", [])
    if os.environ.get("CI", "").lower() != "true" or not skipped:
        return
    terminalreporter.write_line(
        f"CI=true and {len(skipped)} test(s) skipped: in CI every test runs "
        "(install what they need in .ci/run)", red=True)
    terminalreporter._session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- the quick loop: `pytest -m "not e2e"` -------------------------------------------------
# A test module is end-to-end (`e2e`) when it starts processes: it (or a helper module of the
# tests it imports) names subprocess or the like, or it is listed below (it starts them through
# normalize's own code: a tool's program, git for the workspace's checkpoints). The guard keeps
# the marking true: a test not marked e2e that starts a process fails, naming what it started.

_PROCESS_WORDS = re.compile(r"\b(subprocess|Popen|multiprocessing|os\.fork|pty\.spawn|pexpect|"
                            r"ProcessPoolExecutor)\b")
_TESTS = Path(__file__).resolve().parent
E2E_MODULES = frozenset({  # found by the guard: git for checkpoints, rg, ctags, a test runner,
    # the sandbox's tier trial (a confined `true`, once per machine: approval asks whether
    # a command would leave the sandbox)
    "agent/test_agent_token_bench.py", "checkpoints/test_change_watch.py",
    "checkpoints/test_landing.py",
    "cli/test_checkpoint_growth.py", "plugins/test_capabilities.py",
    "plugins/test_plugin_docs.py", "spine/test_exit_door.py", "spine/test_walk.py",
    "terminal/test_user_prompt.py",
    "tools/test_analyze.py", "tools/test_approval.py", "tools/test_ctags.py",
    "tools/test_grep.py", "tools/test_test.py",
    "workflow/test_scope.py", "workflow/test_steps.py", "test_programs.py",
})
"""Test modules (paths under tests/) that start processes through normalize's own code."""
WHOLE_TOOL_MODULES = frozenset({"cli/test_render_typed.py", "cli/test_event_match.py"})
"""In-process, but each runs mypy over the package (15 s): the slow layer too."""
_SPAWNS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                     "os.posix_spawnp", "os.system", "os.spawn"})
_started: list[str] = []  # what the running test (not e2e) started


def _helper(name: str, directory: Path) -> Path | None:
    """The tests' helper module `name` (the tests import them by bare name from any folder;
    `support.cli`: a module of the `tests/support` package)."""
    dotted = _TESTS.joinpath(*name.split("."))
    if (dotted / "__init__.py").is_file():
        return dotted / "__init__.py"
    if "." in name and dotted.with_suffix(".py").is_file():
        return dotted.with_suffix(".py")
    name = name.split(".")[0]
    near = directory / f"{name}.py"
    if near.is_file():
        return near
    return next((p for p in _TESTS.rglob(f"{name}.py") if "fixtures" not in p.parts), None)


def starts_processes(path: Path, _seen: frozenset[Path] = frozenset()) -> bool:
    """Whether the test module (or a helper of the tests it imports) starts processes."""
    text = path.read_text(encoding="utf-8")
    if _PROCESS_WORDS.search(text) or \
            path.relative_to(_TESTS).as_posix() in E2E_MODULES | WHOLE_TOOL_MODULES:
        return True
    for node in ast.walk(ast.parse(text)):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and \
            not node.level else [a.name for a in node.names] if isinstance(node, ast.Import) \
            else []
        for name in names:
            helper = _helper(name, path.parent)
            if helper is not None and helper not in _seen and \
                    starts_processes(helper, _seen | {path}):
                return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    """The `e2e` marker, declared where it is applied (this file also runs where pyproject.toml
    is not: tests/plugins/test_hermetic.py runs it over a planted module)."""
    config.addinivalue_line("markers", "e2e: starts processes (`-m 'not e2e'`: the quick loop)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known: dict[Path, bool] = {}
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if path not in known:
            known[path] = path.is_relative_to(_TESTS) and starts_processes(path)
        if known[path]:
            item.add_marker(pytest.mark.e2e)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _SPAWNS and _started is not None and len(_started) < 3:
        _started.append(f"{event} {str(args[:2])[:200]}")


sys.addaudithook(_audit)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _started.clear()  # before the test's fixtures of any scope are set up


@pytest.fixture(autouse=True)
def e2e_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked e2e may start no process (the quick loop stays quick and true)."""
    yield
    if _started and request.node.get_closest_marker("e2e") is None:
        started = "; ".join(_started)
        _started.clear()
        pytest.fail(f"{request.node.nodeid} is not marked e2e but started a process "
                    f"({started}): add its module to E2E_MODULES in tests/conftest.py",
                    pytrace=False)
