"""Every secret shape, in every sink that shows or exports, is redacted; resume gets it exact.

One workflow prints all the shapes (a program, then `view`), asks, and after
`resume --answer` writes its `payload` var (all the shapes) to a file. It runs
twice, with `--json` and with the plain view; the live view is fed by a real
emitter. Each row of the table is then looked for in every sink.
"""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from secret_shapes import (
    DSN,
    ENV_SECRET,
    KEY,
    PAYLOAD,
    SHAPES,
    VARS,
    cli,
    make_workspace,
    workflow,
)

from normalize.contract.driver import DriverServices
from normalize.drivers.workflow import WorkflowDriver
from normalize.events import ActionFinished, Emitter, ModelReplied, RunEnded, TextDelta
from normalize.redact import Redactor
from normalize.store import TaskStore


def _run(root: Path, home: Path, *, json_output: bool) -> dict[str, Any]:
    """Run the workflow to its question and on after the answer; what each sink holds."""
    flow = workflow(root / "sinks.toml")
    shown = ["--json"] if json_output else []
    first = cli("run", str(flow), *VARS, *shown, cwd=root, home=home)
    assert first.returncode == 4, first.stderr
    task_id, = [p.name[:-5] for p in (home / "tasks").glob("*.json")]
    waiting = TaskStore(home).load(task_id)
    again = cli("resume", task_id, *shown, cwd=root, home=home)  # no answer: asks again
    assert again.returncode == 4 and "Carry on with postgres://app:" in again.stdout + again.stderr
    second = cli("resume", task_id, "--answer", "yes", *shown, cwd=root, home=home)
    assert second.returncode == 0, second.stderr
    show = cli("tasks", "show", task_id, cwd=root, home=home)
    show_json = cli("tasks", "show", task_id, "--json", cwd=root, home=home)
    listing = cli("tasks", cwd=root, home=home)
    tasks = home / "tasks"
    return {
        "id": task_id,
        "waiting": waiting,
        "journal": (tasks / f"{task_id}.jsonl").read_text(),
        "cache": "".join(p.read_text() for p in sorted((tasks / task_id / "cache").glob("*"))),
        "cache_files": sorted((tasks / task_id / "cache").glob("r*.txt")),
        "stdout": first.stdout + again.stdout + second.stdout,
        "stderr": first.stderr + again.stderr + second.stderr,
        "tasks show": show.stdout + show.stderr + show_json.stdout + listing.stdout,
        "out": (root / "out.txt").read_text(),
        "used": (root / "used.txt").read_text(),
        # what resume executes: the task file and, beside it, its config (the run's
        # variables) and kept values
        "task file": "".join(p.read_text() for p in [
            tasks / f"{task_id}.json", *sorted((tasks / task_id).glob("config-*.json")),
            *sorted((tasks / task_id).glob("kept-*.json"))]),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for mode in ("json", "plain"):
        base = tmp_path_factory.mktemp(f"sinks-{mode}")
        root = make_workspace(base / "ws")
        out[mode] = _run(root, base / "home", json_output=mode == "json")
    return out


def _live_view(tmp_path: Path) -> str:
    """The live view's output for events carrying every shape, deltas split mid-secret."""
    from rich.console import Console

    from normalize.cli.render import LiveRenderer

    make_workspace(tmp_path / "ws")
    console = Console(file=io.StringIO(), width=100, force_terminal=True, _environ={})
    renderer = LiveRenderer(console, auto_refresh=False)
    emitter = Emitter("live0001", redact=Redactor.for_workspace(
        tmp_path / "ws", env={"MY_SERVICE_TOKEN": ENV_SECRET}))
    emitter.subscribe(renderer)
    streamed = []
    emitter.subscribe(lambda e: streamed.append(e.text) if isinstance(e, TextDelta) else None)
    for piece in [PAYLOAD[i:i + 7] for i in range(0, len(PAYLOAD), 7)]:
        emitter.emit(TextDelta(text=piece))
    emitter.emit(ModelReplied(text=PAYLOAD))
    emitter.emit(ActionFinished(command="run emit.py", status="success", preview=PAYLOAD))
    emitter.emit(RunEnded(status="done", summary=PAYLOAD.splitlines()[0]))
    renderer.close()
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue() + "\n".join(streamed)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _live_view(tmp_path_factory.mktemp("live"))


SINKS = ["journal", "--json stdout", "cache files", "tasks show", "plain view", "live view"]


def _sink(runs: dict[str, dict[str, Any]], live: str, sink: str) -> str:
    if sink == "journal":
        return str(runs["json"]["journal"] + runs["plain"]["journal"])
    if sink == "--json stdout":
        return str(runs["json"]["stdout"] + runs["json"]["stderr"])
    if sink == "cache files":
        return str(runs["json"]["cache"] + runs["plain"]["cache"])
    if sink == "tasks show":
        return str(runs["json"]["tasks show"] + runs["plain"]["tasks show"])
    if sink == "plain view":
        return str(runs["plain"]["stdout"] + runs["plain"]["stderr"])
    return live


EXTRA = [("must-show dsn", DSN, "s3cretpw"), ("must-show key", KEY, KEY)]


def test_the_table_has_at_least_thirty_shapes() -> None:
    assert len(SHAPES) >= 30
    assert len({name for name, _, _ in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("sink", SINKS)
def test_every_sink_saw_the_output(runs: dict[str, dict[str, Any]], live: str,
                                   sink: str) -> None:
    """Each sink really carried the printed lines (redacted), so the table checks mean it."""
    text = _sink(runs, live, sink)
    assert "[REDACTED]" in text
    if sink not in ("tasks show", "plain view"):  # those show commands and questions only
        assert "DefaultEndpointsProtocol=https" in text


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize(("name", "line", "secret"), SHAPES + EXTRA,
                         ids=[s[0] for s in SHAPES + EXTRA])
def test_no_sink_holds_a_secret(runs: dict[str, dict[str, Any]], live: str, sink: str,
                                name: str, line: str, secret: str) -> None:
    del name, line
    assert secret not in _sink(runs, live, sink)


@pytest.mark.parametrize("mode", ["json", "plain"])
def test_resume_executes_the_real_values(runs: dict[str, dict[str, Any]], mode: str) -> None:
    run = runs[mode]
    assert run["out"].rstrip("\n") == PAYLOAD  # the step after the answer got every value
    assert run["used"] == f"{DSN} {KEY}"  # and a program got the DSN and the key as they are
    waiting = run["waiting"]  # the variables its driver resumes with, exactly as given
    driver = WorkflowDriver.from_config(waiting.config.to_driver_json(), DriverServices())
    driver.restore(waiting.driver_state)
    vars_ = driver.vars
    assert (vars_.get("payload"), vars_.get("dsn"), vars_.get("key")) == (PAYLOAD, DSN, KEY)
    for _, _, secret in SHAPES:
        assert json.dumps(secret)[1:-1] in run["task file"]


def test_the_stored_state_is_owner_only(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["json"]
    home = Path(run["cache_files"][0]).parents[3]
    tasks = home / "tasks"
    paths = [tasks, tasks / f"{run['id']}.json", tasks / f"{run['id']}.jsonl",
             tasks / run["id"], tasks / run["id"] / "cache", *run["cache_files"],
             *(tasks / run["id"]).glob("config-*.json")]
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {mode:04o}"
