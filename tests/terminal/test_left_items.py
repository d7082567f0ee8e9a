"""What a person still ran into after the majors (issue 25's minors), each as they see it."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from support.cli import cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "shapes.py").write_text(
        "class Shape:\n    \"\"\"A shape.\"\"\"\n\n    def area(self) -> float:\n"
        "        return 0.0\n\n    class Unit:\n        def name(self) -> str:\n"
        "            return 'm'\n\n\ndef make(kind: str) -> Shape:\n    return Shape()\n")
    return tmp_path


def test_skeleton_json_returns_symbols_not_one_text_field(project: Path,
                                                          normalize_home: Path) -> None:
    done = cli("skeleton", "--json", "shapes.py", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    symbols = json.loads(done.stdout)["symbols"]
    assert [(s["name"], s["kind"], s["lines"]) for s in symbols] == [
        ("Shape", "class", [1, 9]), ("make", "function", [12, 13])]
    shape = symbols[0]
    assert shape["signature"] == "class Shape:" and shape["doc"] == "A shape."
    assert [c["name"] for c in shape["children"]] == ["area", "Unit"]
    assert shape["children"][1]["children"][0]["name"] == "name"
    assert shape["children"][0]["signature"] == "def area(self) -> float:"
    tree = json.loads(cli("skeleton", "--json", ".", cwd=project, home=normalize_home).stdout)
    assert tree["symbols"][0]["path"] == "shapes.py"
    assert tree["symbols"][0]["symbols"] == symbols


def closed_port() -> int:
    """A loopback port nothing listens on (bound, never listened, closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_local_model_server_not_running_is_named_before_a_task_exists(
        project: Path, normalize_home: Path) -> None:
    port = closed_port()
    started = time.monotonic()
    done = cli("agent", "--model", "ollama:qwen3", "say hi", cwd=project, home=normalize_home,
               env={"OLLAMA_HOST": f"127.0.0.1:{port}"})
    assert time.monotonic() - started < 5  # no retries first
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"normalize: error: ollama qwen3: connection refused: is Ollama running at "
        f"127.0.0.1:{port}? Start it with `ollama serve` (OLLAMA_HOST or --base-url for "
        "another address)"]
    assert cli("tasks", cwd=project, home=normalize_home).stdout.strip() == "no tasks yet"
    other = cli("agent", "--model", "openai:m", "--base-url", f"http://localhost:{port}/v1",
                "say hi", cwd=project, home=normalize_home, env={"OPENAI_API_KEY": "k"})
    assert other.returncode == 2
    assert f"is the model server running at localhost:{port}?" in other.stderr
    (project / "m.toml").write_text('[workflow]\nname = "m"\n\n[workflow.llm]\n'
                                    'model = "ollama:qwen3"\n\n[[workflow.steps]]\n'
                                    'name = "a"\naction = "view ."\n')
    flow = cli("run", "m.toml", cwd=project, home=normalize_home,
               env={"OLLAMA_HOST": f"127.0.0.1:{port}"})
    assert flow.returncode == 2 and "is Ollama running at" in flow.stderr
    assert cli("tasks", cwd=project, home=normalize_home).stdout.strip() == "no tasks yet"


def test_a_refused_local_server_mid_task_is_not_retried() -> None:
    from normalize.errors import ProviderError
    from normalize.providers.base import ModelRequest, close_client, complete
    from normalize.providers.registry import create_client

    client = create_client("ollama:qwen3", env={"OLLAMA_HOST": f"localhost:{closed_port()}"})
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError, match="is Ollama running at localhost:") as raised:
            complete(client, ModelRequest("", [{"role": "user", "content": "hi"}]))
    finally:
        close_client(client)
    assert not raised.value.retryable and time.monotonic() - started < 3


DEMO = ('[workflow]\nname = "demo"\n\n[[workflow.steps]]\nname = "look"\n'
        'action = "view shapes.py"\n')


def test_a_damaged_task_is_shown_from_its_journal_and_found_after_it_is_moved_aside(
        project: Path, normalize_home: Path) -> None:
    (project / "demo.toml").write_text(DEMO)
    ran = cli("run", "demo.toml", cwd=project, home=normalize_home)
    assert ran.returncode == 0, ran.stderr
    task_id = json.loads(cli("tasks", "--json", cwd=project, home=normalize_home).stdout)["id"]
    path = normalize_home / "tasks" / f"{task_id}.json"
    path.write_text('{"id": "' + task_id + '", "wor')
    shown = cli("tasks", "show", task_id, cwd=project, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    assert f"{path}: damaged task file" in shown.stderr and "shown from its journal" in shown.stderr
    assert "view shapes.py" in shown.stdout and "goal:      demo" in shown.stdout
    resumed = cli("resume", task_id, cwd=project, home=normalize_home)
    assert resumed.returncode == 1 and "moved aside to" in resumed.stderr
    aside, = (normalize_home / "tasks").glob(f"{task_id}.json.corrupt-*")
    assert str(aside) in cli("tasks", "show", task_id[:5], cwd=project,
                             home=normalize_home).stderr  # found by prefix, naming where
    listed = cli("tasks", cwd=project, home=normalize_home)
    assert listed.stdout.splitlines()[1].split()[:2] == [task_id, "damaged"]
    assert f"moved aside to {aside}" in listed.stderr
    report = cli("report", task_id, "-o", "-", cwd=project, home=normalize_home)
    assert report.returncode == 0, report.stderr
    assert "view shapes.py" in report.stdout and "no task matches" not in report.stderr


SLOW_SUITE = '''import time
from pathlib import Path


def test_one():
    pass


def test_two():
    pass


def test_three():
    assert 1 == 2


def test_waits_for_the_go_file():
    deadline = time.monotonic() + 60
    while not Path("go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path("go").exists()
'''
TESTING = '[workflow]\nname = "testing"\n\n[[workflow.steps]]\nname = "tests"\naction = "test"\n'


def test_a_long_test_run_shows_its_counts_and_output_tail_while_it_runs(
        tmp_path: Path, normalize_home: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_slow.py").write_text(SLOW_SUITE)
    (tmp_path / "testing.toml").write_text(TESTING)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "TERM")}
    env.update(NORMALIZE_HOME=str(normalize_home), TERM="xterm-256color", COLUMNS="100")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", "run", "testing.toml"],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                            env=env, cwd=tmp_path)
    os.close(slave)
    seen = b""
    try:
        seen = read_until(master, b"2 passed, 1 failed so far", deadline=60)
        (tmp_path / "go").write_text("")  # only now may the last test end
        seen += read_until(master, None, deadline=60)
    finally:
        os.close(master)
        proc.wait(timeout=60)
        assert proc.stderr is not None
        proc.stderr.close()
    screen = ANSI.sub("", seen.decode("utf-8", "replace"))
    assert "2 passed, 1 failed so far" in screen  # while the fourth test still ran
    assert "│ ..F" in screen  # pytest's progress line, as it was being written
    journal, = [p for p in (normalize_home / "tasks").glob("*.jsonl") if p.name != "index.jsonl"]
    assert "action_progressed" not in journal.read_text()  # shown live, never kept


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def read_until(fd: int, wanted: bytes | None, *, deadline: float) -> bytes:
    """What the terminal shows until `wanted` appears (None: until it closes)."""
    got = b""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            return got
        if not data:
            return got
        got += data
        if wanted is not None and wanted in ANSI.sub("", got.decode("utf-8", "replace")).encode():
            return got
    raise AssertionError(f"not seen in time: {wanted!r}; saw {got[-2000:]!r}")


def test_the_live_view_draws_a_running_programs_counts_and_tail() -> None:
    from rich.console import Console

    from normalize.cli.render import LiveRenderer
    from normalize.events import ActionProgressed, ActionStarted, Emitter, RunStarted

    console = Console(file=io.StringIO(), width=60, height=40, force_terminal=True,
                      color_system=None, _environ={})
    renderer = LiveRenderer(console, auto_refresh=False, clock=lambda: 0.0)
    emitter = Emitter("abc12345")
    emitter.subscribe(renderer)
    emitter.emit(RunStarted(goal="g", driver="workflow", workspace="/w"))
    emitter.emit(ActionStarted(key="0.0", tool="test", command="test"))
    emitter.emit(ActionProgressed(key="0.0", tail=["collected 40 items", "....F.." + "." * 80],
                                  counts={"passed": 86, "failed": 1}))
    shown = io.StringIO()
    Console(file=shown, width=60, color_system=None).print(renderer.view())
    rows = [line.rstrip() for line in shown.getvalue().splitlines()]
    assert "  86 passed, 1 failed so far" in rows
    assert "  │ collected 40 items" in rows
    assert any(row.startswith("  │ ....F..") and len(row) <= 59 for row in rows)
    renderer.close()


TWO_STEPS = ('[workflow]\nname = "two"\n\n[[workflow.steps]]\nname = "a"\naction = "view shapes.py"'
             '\n\n[[workflow.steps]]\nname = "b"\naction = "view shapes.py"\n')


def test_a_person_at_the_user_prompt_in_a_pipe_sees_a_forty_line_file_whole(
        project: Path, normalize_home: Path) -> None:
    (project / "forty.py").write_text("".join(f"line_{n:02d} = {n}\n" for n in range(1, 41)))
    (project / "two.toml").write_text(TWO_STEPS)
    first = cli("run", "two.toml", "--max-turns", "1", cwd=project, home=normalize_home)
    assert first.returncode == 3, first.stderr
    full = {k: v for k, v in os.environ.items() if k not in ("NORMALIZE_CRASH_AT", "LINES")}
    full.update(NORMALIZE_HOME=str(normalize_home), TERM="dumb")
    handed = subprocess.run([sys.executable, "-m", "normalize.cli.app", "resume", "last",
                             "--driver", "user"], cwd=project, env=full,
                            input="view forty.py\ndone\n", capture_output=True, text=True,
                            timeout=60)
    assert handed.returncode == 0, handed.stderr
    for n in range(1, 41):  # no terminal: no height to fit, so the whole file
        assert f"line_{n:02d} = {n}" in handed.stdout, handed.stdout
    assert "more lines" not in handed.stdout


LAUNCH = ("import sys\nfrom normalize.cli.entry import main\n"  # what the console script does
          "sys.stderr.write('launched\\n'); sys.stderr.flush()\nsys.exit(main())\n")


def test_ctrl_c_right_after_start_never_prints_a_traceback(project: Path,
                                                           normalize_home: Path) -> None:
    (project / "demo.toml").write_text(DEMO)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    env.update(NORMALIZE_HOME=str(normalize_home), TERM="xterm-256color")
    for number, delay in enumerate(range(0, 120, 6)):
        command = ["tasks"] if number % 2 else ["run", "demo.toml"]
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *command], stdin=slave,
                                stdout=slave, stderr=subprocess.PIPE, env=env, cwd=project)
        os.close(slave)
        assert proc.stderr is not None
        assert proc.stderr.readline() == b"launched\n"
        time.sleep(delay / 1000)  # a person's Ctrl-C, 0 to 114 ms into the app's start
        proc.send_signal(signal.SIGINT)
        screen = read_until(master, None, deadline=60)
        err = proc.stderr.read()
        proc.stderr.close()
        os.close(master)
        status = proc.wait(timeout=60)
        shown = screen + err
        assert b"Traceback" not in shown and b"KeyboardInterrupt" not in shown, (delay, shown)
        assert status in (0, 130), (delay, status, shown)


def test_mcp_at_a_terminal_says_what_it_serves_and_stops_at_ctrl_c(project: Path,
                                                                   normalize_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(NORMALIZE_HOME=str(normalize_home), TERM="xterm-256color")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp"], stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, env=env, cwd=project)
    os.close(slave)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline() == b"launched\n"
        said = proc.stderr.readline().decode()
        assert said.startswith(f"normalize mcp: serving {project.resolve()}'s code tools over MCP")
        assert said.rstrip().endswith("Ctrl-C stops")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130  # not waiting for a line on stdin
        rest = proc.stderr.read().decode()
        assert rest == "normalize mcp: stopped\n" and "Traceback" not in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        os.close(master)


def test_workflows_list_marks_an_untrusted_project_workflow_and_which_one_runs(
        project: Path, normalize_home: Path) -> None:
    found = project / ".normalize" / "workflows"
    found.mkdir(parents=True)
    step = '\n\n[[workflow.steps]]\nname = "a"\naction = "view ."\n'
    (found / "dwim.toml").write_text('[workflow]\nname = "dwim"\ndescription = "planted"' + step)
    (found / "mine.toml").write_text('[workflow]\nname = "mine"\ndescription = "my own"' + step)
    listed = cli("workflows", "list", cwd=project, home=normalize_home)
    assert listed.returncode == 0, listed.stderr
    rows = {(line.split()[0], line.split()[1]): line for line in listed.stdout.splitlines()[1:]}
    planted = rows[("dwim", "project")]
    assert "not used, untrusted: the one below runs instead" in planted
    assert f"normalize trust {found / 'dwim.toml'}" in planted and "planted" not in planted
    assert rows[("dwim", "builtin")].split()[2] == "llm"  # the built-in runs
    assert "my own (untrusted: may only narrow permissions" in rows[("mine", "project")]
    as_json = [json.loads(line) for line in cli("workflows", "list", "--json", cwd=project,
                                                home=normalize_home).stdout.splitlines()]
    dwim = [(r["origin"], r["trust"], r["used"]) for r in as_json if r["name"] == "dwim"]
    assert dwim == [("project", "shadowed", False), ("builtin", "trusted", True)]


def test_a_person_driving_is_not_asked_to_approve_their_own_edit(project: Path,
                                                                 normalize_home: Path) -> None:
    (project / "two.toml").write_text(TWO_STEPS)
    first = cli("run", "two.toml", "--max-turns", "1", "--approve", "ask", cwd=project,
                home=normalize_home)
    assert first.returncode == 3, first.stderr
    full = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    full.update(NORMALIZE_HOME=str(normalize_home), TERM="dumb")
    handed = subprocess.run([sys.executable, "-m", "normalize.cli.app", "resume", "last",
                             "--driver", "user"], cwd=project, env=full,
                            input="write notes.txt <<EOF\nhello\nEOF\ndone\n",
                            capture_output=True, text=True, timeout=60)
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert "approval" not in handed.stdout + handed.stderr  # the `ask` carried over asks not
    assert (project / "notes.txt").read_text() == "hello\n"
    destructive = subprocess.run([sys.executable, "-m", "normalize.cli.app", "resume", "last",
                                  "--driver", "user"], cwd=project, env=full,
                                 input="run rm -rf notes.txt\ndone\n", capture_output=True,
                                 text=True, timeout=60)
    assert (project / "notes.txt").exists(), destructive.stdout  # that still needs a yes


def test_the_always_choice_says_what_it_lets_through() -> None:
    from normalize.cli.approve import approver
    from normalize.cli.console import Environment
    from normalize.tools.approval import Question, covers

    err = io.StringIO()
    master, slave = pty.openpty()  # the person's terminal
    with os.fdopen(slave, "r") as terminal:
        os.write(master, b"a\n")
        env = Environment(stdin=terminal, stdout=io.StringIO(), stderr=err, env={})
        ask = approver(env, lambda: None)
        question = Question("Allow edit `src/app.py`?", "+x = 1", covers(["tool:edit"]))
        assert ask(question) == "always"
    os.close(master)
    assert "[y]es / [n]o / [a]lways (every edit in this run): " in err.getvalue()
    assert covers(["rm", "python -m pytest"]) == \
        "every `rm` command and every `python -m pytest` command in this run"


SLEEPY = '[workflow]\nname = "sl"\n\n[[workflow.steps]]\nname = "a"\naction = "run sleep 30"\n'
CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def final_screen(raw: bytes) -> list[str]:
    """What a terminal shows after `raw`: lines, carriage returns, erase-line, cursor up."""
    rows, row, col, at = [""], 0, 0, 0
    text = raw.decode("utf-8", "replace")
    while at < len(text):
        match = CSI.match(text, at)
        if match:
            arg, verb = match.groups()
            if verb == "K":
                rows[row] = rows[row][:col] if arg in ("", "0") else ""
            elif verb == "A":
                row = max(0, row - int(arg or 1))
            at = match.end()
            continue
        char, at = text[at], at + 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
            rows.extend([""] * (row + 1 - len(rows)))
        else:
            rows[row] = rows[row][:col].ljust(col) + char + rows[row][col + 1:]
            col += 1
    return [line.rstrip() for line in rows]


def test_ctrl_c_in_the_live_view_leaves_no_dead_spinner_and_cuts_no_notice(
        project: Path, normalize_home: Path) -> None:
    (project / "sl.toml").write_text(SLEEPY)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update(NORMALIZE_HOME=str(normalize_home), TERM="xterm-256color")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "run", "sl.toml", "--approve",
                             "yes"], stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=project)
    os.close(slave)
    try:
        seen = read_until(master, b"run sleep 30", deadline=60)
        seen += read_until(master, b"step 1/1: a", deadline=60)  # the live region is up
        proc.send_signal(signal.SIGINT)
        seen += read_until(master, None, deadline=60)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    screen = final_screen(seen)
    assert not [line for line in screen if "run sleep 30" in line and line.endswith("s")
                and "stopped" not in line], screen  # no spinner line left behind
    joined = " ".join(line.strip() for line in screen)
    assert "stopping — the running action is cancelled and the task saved as interrupted " \
           "(press again to stop at once)" in joined, screen
    assert "leaves it to the workflow's on_interrupt or to the model" in joined, screen
    assert joined.count("outcome is unknown") == 1


def test_a_failed_actions_error_is_said_once_in_tasks_show_and_the_report(
        project: Path, normalize_home: Path) -> None:
    (project / "two.toml").write_text(TWO_STEPS)
    cli("run", "two.toml", "--max-turns", "1", cwd=project, home=normalize_home)
    full = {k: v for k, v in os.environ.items() if k != "NORMALIZE_CRASH_AT"}
    full.update(NORMALIZE_HOME=str(normalize_home), TERM="dumb")
    typed = "grep\nedit shapes.py <<EOF\nno such lines\n=======\nx\nEOF\ndone\n"
    subprocess.run([sys.executable, "-m", "normalize.cli.app", "resume", "last", "--driver",
                    "user"], cwd=project, env=full, input=typed, capture_output=True,
                   text=True, timeout=60, check=True)
    shown = cli("tasks", "show", "last", cwd=project, home=normalize_home).stdout
    assert shown.count("grep needs a PATTERN") == 1, shown
    assert shown.count("needs SEARCH/REPLACE blocks") == 1, shown
    report = cli("report", "last", "-o", "-", cwd=project, home=normalize_home).stdout
    for error in ("grep needs a PATTERN", "needs SEARCH/REPLACE blocks"):
        assert report.count(error) == 2  # under "Errors first", then at its step: no output copy


def test_an_untrusted_workflows_ignored_permission_is_said_once(project: Path,
                                                               normalize_home: Path) -> None:
    found = project / ".normalize" / "workflows"
    found.mkdir(parents=True)
    (found / "mine.toml").write_text('[workflow]\nname = "mine"\n\n[workflow.permissions]\n'
                                     'mode = "yes"\n\n[[workflow.steps]]\nname = "a"\n'
                                     'action = "view ."\n')
    for flags in ([], ["-q"], ["--json"]):
        done = cli("run", "mine", *flags, cwd=project, home=normalize_home)
        assert done.returncode == 0, done.stderr
        said = (done.stdout + done.stderr).count('ignored mode = \\"yes\\"' if flags == ["--json"]
                                                 else 'ignored mode = "yes"')
        assert said == 1, (flags, done.stdout, done.stderr)


def test_an_outcome_unknown_on_resume_is_said_once(project: Path, normalize_home: Path) -> None:
    (project / "w.toml").write_text('[workflow]\nname = "w"\n\n[[workflow.steps]]\nname = "a"\n'
                                    'action = "write out.txt <<EOF\\nhi\\nEOF"\n')
    crashed = cli("run", "w.toml", cwd=project, home=normalize_home,
                  env={"NORMALIZE_CRASH_AT": "action_started"})
    assert crashed.returncode != 0
    resumed = cli("resume", "last", cwd=project, home=normalize_home)
    lines = [line for line in resumed.stdout.splitlines() if "write out.txt" in line]
    assert len(lines) == 1 and lines[0].lstrip().startswith("? write out.txt"), resumed.stdout
    assert "interrupted, outcome unknown" not in resumed.stdout  # the result's lines say it


LONG_ASSERT = ("add(1, 2) should be three, and this message is long enough that a cut at a "
               "hundred characters would hide its end: THE-END")
DOCSTRING_TEST = ('from calc import add\n\n\ndef test_add():\n    """Adding works.\n'
                  '    Error: a docstring line, not an error\n    """\n'
                  f'    assert add(1, 2) == 3, "{LONG_ASSERT}"\n')


def test_run_health_shows_its_report_and_the_whole_first_failure(project: Path,
                                                                  normalize_home: Path) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_calc.py").write_text(DOCSTRING_TEST)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    done = cli("run", "health", cwd=project, home=normalize_home)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert LONG_ASSERT in out  # the first failure's whole assertion, as check promises
    ending = out[out.index(" done · "):]
    assert "  tests: 1 failed · " in ending and "\n  languages:" in ending  # the report itself
    assert "\n  most complex functions:" in ending
    shown = cli("tasks", "show", "last", cwd=project, home=normalize_home).stdout
    step = shown[shown.index("test --quick"):shown.index("step 3/3")]
    assert "Error: a docstring line" not in step  # a docstring is not an error
    assert "should be thr..." not in step  # pytest's cut summary is not shown for the whole
    assert "pytest: 1 failed" in step and LONG_ASSERT in step


def test_a_preview_never_shows_a_heading_over_nothing() -> None:
    from normalize.execution.cache import build_preview

    content = "\n" * 20 + "\n".join(f"ERROR: problem {n}" for n in range(40))
    preview = build_preview(content, "r1", preview_lines=12, preview_chars=2000)
    lines = preview.splitlines()
    if "first lines:" in lines:
        assert any(line.strip() for line in lines[lines.index("first lines:") + 1:-1]), preview
